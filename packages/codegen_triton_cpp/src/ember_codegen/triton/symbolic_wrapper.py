"""One Triton wrapper for every binding of a graph's size symbols (issue 13).

The kernels already serve every size (symbolic.py: the size symbols are int arguments). This
wrapper reads the symbols from the call's inputs (SymbolicReads, shared with the C++
target) and prints every buffer size and stride, grid and size argument as a Python
expression over them (size_printing.python_size, shared too), so one ``exec`` of one
source serves every size. Where a planning decision would depend on the values
(NeedsConcreteSizes), the graph keeps the per-binding wrapper (DynamicWrapper), logged and
counted in WRAPPER_STATS like the C++ target's (ember_codegen/wrapper/dynamic_wrapper.py).

A direct launch (GPU) passes the size arguments to a binary warmed up on the example sizes,
which took them as int32 where they fit: it is used only while every size argument still
fits (checked per call, with the pointer alignments), else the launch goes through the
JIT, which picks (or compiles) the binary for the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy

from ember_codegen.size_printing import python_size
from ember_codegen.wrapper.dynamic_wrapper import SizeBinder, symbolic_wrapper_call
from ember_codegen.wrapper.size_bindings import NeedsConcreteSizes, SymbolicSizes
from ember_codegen.wrapper.symbolic_reads import SymbolicReads
from ember_codegen.wrapper.writer import WrapperCode
from ember_inductor_ir import Schedule
from ember_inductor_ir.indexing import FloorDiv

from .index_printer import INT32_LIMIT
from .kernel import GroupKernels, TritonKernel
from .wrapper import TritonWrapperBuilder


def grid_x(kernel: TritonKernel) -> str:
    """The launch grid's programs as Python over the symbols' locals (a literal when
    static): ceil(xnumel / XBLOCK)."""
    xnumel = sympy.sympify(kernel.xnumel)
    block = kernel.config.XBLOCK
    if not xnumel.free_symbols:
        return str(kernel.grid()[0])
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

    unspecialized = "a size or an address"

    def _grid(self, kernel: TritonKernel) -> tuple[str, ...]:
        return (grid_x(kernel),)

    def _size_checks(self, kernel: TritonKernel) -> list[str]:
        """Whether the size arguments still fit the binary's int32: checked per call."""
        return [f"{n} <= {INT32_LIMIT}" for n in kernel.size_params]

    def _loops(self, group_name: str) -> None:
        group: GroupKernels = self.kernels[group_name]  # type: ignore[assignment]
        if group.workspaces:  # split reductions are not chosen for symbolic sizes
            raise NeedsConcreteSizes(f"group {group_name} has workspaces")
        super()._loops(group_name)


def symbolic_triton_call(
    sched: Schedule,
    groups: dict[str, GroupKernels],
    namespace: dict[str, Any],
    binder: SizeBinder,
) -> tuple[Callable, WrapperCode] | None:
    """`call(args)` serving every binding and its wrapper, or None where the wrapper needs
    concrete sizes (logged and counted; the caller writes it per binding)."""

    def build(sizes: SymbolicSizes) -> WrapperCode:
        return SymbolicTritonWrapperBuilder(sched, groups, binder, sizes).build()

    return symbolic_wrapper_call(sched, build, namespace, "triton wrapper")
