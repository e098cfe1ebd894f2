"""One Triton wrapper for every binding of a graph's size symbols (issue 13).

The kernels already serve every size (symbolic.py: the size symbols are int arguments). This
wrapper reads the symbols from the call's inputs (SymbolicReads, shared with the C++
target) and prints every buffer size and stride, grid and size argument as a Python
expression over them (size_printing.python_size, shared too), so one ``exec`` of one
source serves every size. Where a planning decision would depend on the values
(NeedsConcreteSizes), the graph keeps the per-binding wrapper (DynamicWrapper), logged and
counted in WRAPPER_STATS like the C++ target's.

A direct launch (GPU) passes the size arguments to a binary warmed up on the example sizes,
which took them as int32 where they fit: it is used only while every size argument still
fits (checked per call, with the pointer alignments), else the launch goes through the
JIT, which picks (or compiles) the binary for the value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sympy

from ember_codegen.cpp.emit.dynamic_wrapper import SizeBinder
from ember_codegen.cpp.emit.size_bindings import (
    WRAPPER_STATS,
    NeedsConcreteSizes,
    SymbolicSizes,
    concrete,
    symbolic,
)
from ember_codegen.cpp.emit.wrapper import WrapperCode
from ember_codegen.size_printing import python_size
from ember_codegen.symbolic_reads import SymbolicReads
from ember_inductor_ir import Schedule
from ember_inductor_ir.indexing import FloorDiv

from .index_printer import INT32_LIMIT
from .kernel import GroupKernels, TritonKernel
from .launch import POINTER_ALIGNMENT, DirectLaunch, alignment_check
from .wrapper import TritonWrapperBuilder

log = logging.getLogger("ember.output_code")


def grid_x(kernel: TritonKernel) -> str:
    """The launch grid's programs as Python over the symbols' locals (a literal when
    static): ceil(xnumel / XBLOCK)."""
    xnumel = sympy.sympify(kernel.xnumel)
    block = kernel.config.XBLOCK
    if not xnumel.free_symbols:
        return str(-(-int(xnumel) // block))
    return python_size(FloorDiv(xnumel + block - 1, block))


class SymbolicTritonWrapperBuilder(SymbolicReads, TritonWrapperBuilder):
    """The Triton wrapper with sizes as expressions; build it inside `symbolic(env)`."""

    def __init__(
        self,
        sched: Schedule,
        groups: dict[str, GroupKernels],
        binder: SizeBinder,
        sizes: SymbolicSizes,
    ) -> None:
        self.sizes = sizes
        self.binder = binder
        super().__init__(sched, groups)

    def _direct(self, kernel: TritonKernel) -> DirectLaunch | None:
        """The binary's direct launch unless a constant's address is not aligned as it was
        specialized; whether the size arguments still fit int32 is checked per call."""
        direct = kernel.direct
        if direct is None:
            return None
        for name in direct.aligned & set(self.sched.constants):
            if self.sched.constants[name].data_ptr() % POINTER_ALIGNMENT:
                return None
        return direct

    def _launch(self, kernel: TritonKernel) -> None:
        w = self.w
        cfg = kernel.config
        consts = cfg.constexprs(kernel.reduction)
        self.sizes.used |= set(kernel.size_params)  # read in the prologue
        args = [*kernel.params, *kernel.size_params]
        grid = grid_x(kernel)
        jit_args = [*args, *(f"{k}={v}" for k, v in consts.items())]
        jit_args += [f"num_warps={cfg.num_warps}", f"num_stages={cfg.num_stages}"]
        jit_launch = f"_k_{kernel.name}[({grid},)]({', '.join(jit_args)})"
        direct = self._direct(kernel)
        if direct is None:
            w.line(jit_launch)
            return
        w.namespace[f"_run_{kernel.name}"] = direct.run
        w.namespace[f"_fn_{kernel.name}"] = direct.function
        w.namespace[f"_meta_{kernel.name}"] = direct.packed_metadata
        launch_args = [
            grid, "1", "1", "_stream", f"_fn_{kernel.name}", f"_meta_{kernel.name}",
            "None", "None", "None", *args, *map(str, consts.values()),
        ]  # fmt: skip
        checks = [f"{n} <= {INT32_LIMIT}" for n in kernel.size_params]
        aligned = sorted(direct.aligned & self.foreign & set(kernel.params))
        if aligned:
            checks.append(alignment_check(aligned))
        direct_launch = f"_run_{kernel.name}({', '.join(launch_args)})"
        if not checks:
            w.line(direct_launch)
            return
        w.line(f"if {' and '.join(checks)}:")
        w.line(f"    {direct_launch}")
        w.line("else:  # a size or an address the binary was not specialized for")
        w.line(f"    {jit_launch}")

    def _loops(self, group_name: str) -> None:
        group: GroupKernels = self.kernels[group_name]  # type: ignore[assignment]
        if group.workspaces:  # split reductions are not chosen for symbolic sizes
            raise NeedsConcreteSizes(f"group {group_name} has workspaces")
        for kernel in group.kernels:
            if concrete(kernel.xnumel) == 0:  # structurally empty (symbols are >= 2)
                self.w.line(f"# {kernel.name}: nothing to compute (empty)")
                continue
            self._launch(kernel)


def symbolic_triton_call(
    sched: Schedule,
    groups: dict[str, GroupKernels],
    namespace: dict[str, Any],
    binder: SizeBinder,
) -> tuple[Callable, WrapperCode] | None:
    """`call(args)` serving every binding and its wrapper, or None where the wrapper needs
    concrete sizes (logged and counted; the caller writes it per binding)."""
    try:
        with symbolic(sched.shape_env) as sizes:
            wrapper = SymbolicTritonWrapperBuilder(sched, groups, binder, sizes).build()
    except NeedsConcreteSizes as reason:
        WRAPPER_STATS["per_binding_fallback"] += 1
        log.info("Triton wrapper written per binding of the size symbols: %s", reason)
        return None
    scope = {**namespace, **wrapper.namespace}
    exec(compile(wrapper.source, "<ember symbolic triton wrapper>", "exec"), scope)
    WRAPPER_STATS["symbolic"] += 1
    WRAPPER_STATS["wrapper_execs"] += 1
    return scope["call"], wrapper
