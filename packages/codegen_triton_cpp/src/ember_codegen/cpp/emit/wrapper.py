"""The generated Python wrapper: guards inputs, allocates buffers per the memory plan,
computes each data pointer once, calls the kernels and extern ops, returns the outputs.

Every buffer variable in the wrapper is a tensor with exactly its buffer's layout (sizes,
strides, storage offset); kernels receive ``data_ptr()`` and index relative to it.
Non-literal objects (kernels, extern callables, dtypes, constants) live in the wrapper's
namespace under generated names, so the source stays printable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ember_codegen.exc import CodegenError
from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg
from ember_inductor_ir.layout import Layout

from .kernel import KernelSource

#: Library prims whose aten op takes the same arguments: the wrapper calls aten directly.
#: The prim's own kernel re-checks its arguments on meta tensors every call (~40 us, an
#: extern's whole cost at small sizes); compilation checked them once, and the inputs are
#: guarded. The result's layout is still checked (``_adopt``).
DIRECT_ATEN_CALLS: dict[str, Any] = {
    "mm": torch.ops.aten.mm.default,
    "bmm": torch.ops.aten.bmm.default,
    "convolution": torch.ops.aten.convolution.default,
    "convolution_backward": torch.ops.aten.convolution_backward.default,
}


def library_call(extern: ExternKernel) -> Any:
    """What the wrapper calls for ``extern``: its aten op where one matches, else the op."""
    if extern.fallback:
        return extern.kernel
    return DIRECT_ATEN_CALLS.get(extern.kernel_name, extern.kernel)


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


@dataclass
class WrapperCode:
    source: str
    namespace: dict[str, Any]
    kernel_names: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._names: dict[int, str] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def const(self, value: Any, hint: str) -> str:
        """A namespace name for ``value`` (one per distinct object)."""
        if id(value) in self._names:
            return self._names[id(value)]
        name = f"_{hint}{len(self._names)}"
        self._names[id(value)] = name
        self.namespace[name] = value
        return name

    def literal(self, value: Any) -> str:
        """Python source for an extern argument that is not a tensor."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self.const(value, "c")
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.literal(v) for v in value)
            return (
                f"[{inner}]"
                if isinstance(value, list)
                else f"({inner}{',' if len(value) == 1 else ''})"
            )
        return self.const(value, "c")


class WrapperBuilder:
    def __init__(self, sched: Schedule, kernels: dict[str, KernelSource]) -> None:
        self.sched = sched
        self.kernels = kernels
        self.w = _Writer()
        self.live: set[str] = set()  # buffer variables holding a tensor right now
        self.pointers: set[str] = set()
        later_reuse = [a.reuses for a in sched.allocations.values() if a.reuses is not None]
        self.reused = set(later_reuse)

    # -- pieces ------------------------------------------------------------------------
    def _layout_args(self, layout: Layout) -> str:
        return f"{_ints(layout.size)}, {_ints(layout.stride)}"

    def _guard_inputs(self) -> None:
        w = self.w
        for k, name in enumerate(self.sched.graph_inputs):
            layout = self.sched.layout(name)
            dtype = w.const(layout.dtype, "dtype")
            size, stride = _ints(layout.size), _ints(layout.stride)
            w.line(
                f"if {name}.shape != {size} or {name}.stride() != {stride} or "
                f"{name}.dtype != {dtype}:"
            )
            w.line(f"    {name} = _relayout({name}, {k}, {size}, {stride}, {dtype})")
            self.live.add(name)

    def _ptr(self, name: str) -> str:
        if name not in self.pointers:
            if name in self.sched.constants:
                value = self.sched.constants[name]
                self.w.namespace[f"p_{name}"] = value.data_ptr()
            else:
                self.w.line(f"p_{name} = {name}.data_ptr()")
            self.pointers.add(name)
        return f"p_{name}"

    def _allocate(self, name: str) -> None:
        w = self.w
        layout = self.sched.layout(name)
        plan = self.sched.allocations.get(name)
        donor = plan.reuses if plan is not None else None
        dtype = w.const(layout.dtype, "dtype")
        size, stride, offset = _ints(layout.size), _ints(layout.stride), int(layout.offset)
        if donor is not None and donor in self.live:
            donor_layout = self.sched.layout(donor)
            same = (_ints(donor_layout.size), _ints(donor_layout.stride), int(donor_layout.offset))
            if same == (size, stride, offset):
                w.line(f"{name} = {donor}; del {donor}")
            else:
                w.line(f"{name} = _as_strided({donor}, {size}, {stride}, {offset}); del {donor}")
            self.live.discard(donor)
        elif offset == 0:
            w.line(f"{name} = _empty_strided({size}, {stride}, dtype={dtype})")
        else:
            numel = layout.storage_numel()
            w.line(
                f"{name} = _as_strided(_empty({numel}, dtype={dtype}), {size}, {stride}, {offset})"
            )
        self.live.add(name)

    def _view_expr(self, arg: TensorArg) -> str:
        """Python expression for an extern argument: the buffer or a strided view of it."""
        if arg.view is None:
            return arg.name
        return self._strided_view(arg.name, arg.view)

    def _strided_view(self, name: str, view: Layout) -> str:
        base = self.sched.layout(name)
        if (_ints(view.size), _ints(view.stride), int(view.offset)) == (
            _ints(base.size),
            _ints(base.stride),
            int(base.offset),
        ):
            return name
        shift = int(view.offset) - int(base.offset)
        offset = f"{name}.storage_offset() + {shift}" if shift else f"{name}.storage_offset()"
        return f"_as_strided({name}, {_ints(view.size)}, {_ints(view.stride)}, {offset})"

    def _loops(self, group_name: str) -> None:
        w = self.w
        kernel = self.kernels[group_name]
        pointers = [self._ptr(p.buffer) for p in kernel.params]
        fn = f"_k_{group_name}"
        w.line(f"{fn}({', '.join(pointers)})")
        if kernel.may_fail:
            w.line(f"if _error.value: _raise_kernel_error({group_name!r})")

    def _extern(self, extern: ExternKernel) -> None:
        w = self.w
        fn = w.const(library_call(extern), "extern")

        def render(value: Any) -> str:
            if isinstance(value, TensorArg):
                return self._view_expr(value)
            if isinstance(value, (list, tuple)) and any(isinstance(v, TensorArg) for v in value):
                inner = ", ".join(render(v) for v in value)
                return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
            return w.literal(value)

        args = [render(a) for a in extern.args]
        args += [f"{k}={render(v)}" for k, v in extern.kwargs.items()]
        w.line(
            f"_r = {fn}({', '.join(args)})  # {extern.kernel_name}{' (fallback)' if extern.fallback else ''}"
        )
        if extern.outputs:
            w.line("_leaves = _r if isinstance(_r, (tuple, list)) else (_r,)")
        for out in extern.outputs:
            layout = out.layout
            dtype = w.const(layout.dtype, "dtype")
            w.line(
                f"{out.name} = _adopt(_leaves[{out.index}], {_ints(layout.size)}, "
                f"{_ints(layout.stride)}, {int(layout.offset)}, {dtype})"
            )
            self.live.add(out.name)

    def _free(self, group_name: str) -> None:
        for name in self.sched.frees.get(group_name, []):
            if name in self.live and name not in self.reused:
                self.w.line(f"del {name}")
                self.live.discard(name)
                self.pointers.discard(name)

    def _outputs(self) -> None:
        items = []
        for spec in self.sched.graph_outputs:
            if spec.name is None:
                items.append(self.w.const(spec.constant, "out"))
            else:
                items.append(self._strided_view(spec.name, spec.layout))
        self.w.line(f"return [{', '.join(items)}]")

    # -- the whole wrapper ---------------------------------------------------------------
    def build(self) -> WrapperCode:
        w = self.w
        for name, value in self.sched.constants.items():
            w.namespace[name] = value  # baked into the graph; read by name
            self.live.add(name)
        inputs = self.sched.graph_inputs
        if inputs:
            w.line(f"{', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")
        self._guard_inputs()
        for group in self.sched:
            w.line(f"# {group.describe()}")
            if group.extern is not None:
                self._extern(group.extern)
            else:
                kernel = self.kernels[group.name]
                for node in group.nodes:
                    name = node.buffer.name
                    if name not in kernel.register_only:
                        self._allocate(name)
                self._loops(group.name)
            self._free(group.name)
        self._outputs()
        source = "def call(args):\n" + "\n".join(w.lines) + "\n"
        return WrapperCode(source, w.namespace, [g.name for g in self.sched if g.extern is None])


def check_cpu(sched: Schedule) -> None:
    for name in sched.graph_inputs:
        device = sched.layout(name).device
        if device.type != "cpu":
            raise CodegenError(
                f"graph input {name} is on {device}; the C++ target runs CPU graphs only "
                "(use target='triton' for GPU graphs)"
            )


def runtime_namespace() -> dict[str, Any]:
    return {
        "_empty_strided": torch.empty_strided,
        "_empty": torch.empty,
        "_as_strided": torch.as_strided,
        "_relayout": relayout_input,
        "_adopt": adopt_extern_output,
    }


def relayout_input(
    t: torch.Tensor, position: int, size: tuple, stride: tuple, dtype: torch.dtype
) -> torch.Tensor:
    """An input whose shape/strides/dtype differ from the example the graph was built for:
    wrong shape or dtype raises; other strides are copied to the expected layout."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"compiled graph input {position}: expected a tensor, got {type(t)}")
    if tuple(t.shape) != size or t.dtype != dtype:
        raise CodegenError(
            f"compiled graph input {position} is {t.dtype}{list(t.shape)}, but the graph was "
            f"compiled for {dtype}{list(size)}; recompile for these inputs"
        )
    if t.device.type != "cpu":
        raise CodegenError(f"compiled graph input {position} is on {t.device}, expected cpu")
    if all(n <= 1 or a == b for n, a, b in zip(size, t.stride(), stride, strict=True)):
        return t
    return torch.empty_strided(size, stride, dtype=dtype).copy_(t)


def adopt_extern_output(
    t: torch.Tensor, size: tuple, stride: tuple, offset: int, dtype: torch.dtype
) -> torch.Tensor:
    """An extern kernel's result as the buffer: taken as is when it already has the
    buffer's layout, else copied into a fresh tensor that has it."""
    if (
        tuple(t.shape) == size
        and t.stride() == stride
        and t.storage_offset() == offset
        and t.dtype == dtype
    ):
        return t
    numel = (
        0 if 0 in size else offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1
    )
    out = torch.empty(max(numel, 0), dtype=dtype).as_strided(size, stride, offset)
    return out.copy_(t)
