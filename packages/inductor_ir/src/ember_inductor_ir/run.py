"""``run_scheduled(schedule, inputs)``: execute kernel groups with the torch interpreter.

The reference executor (no code generation): it allocates storages following the memory
plan (so buffer reuse is exercised), evaluates every loops group over its whole index grid
with :class:`InterpretHandler`, calls extern kernels on strided views, and returns the
graph's outputs as strided views of their buffers, like a generated wrapper would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_map

from .errors import InterpretError
from .extern import ExternKernel, TensorArg
from .handlers.interpret import InterpretHandler
from .indexing import static_int
from .layout import Layout
from .lowering.collectives import is_collective
from .scheduler.kernel_group import KernelGroup, Schedule


def _flat_storage(t: torch.Tensor) -> torch.Tensor:
    numel = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((numel,), (1,), 0)


def _view(storage: torch.Tensor, layout: Layout) -> torch.Tensor:
    size = [static_int(s, "size") for s in layout.size]
    stride = [static_int(s, "stride") for s in layout.stride]
    return storage.as_strided(size, stride, static_int(layout.offset, "offset"))


class _Memory:
    """Flat storages by buffer name, with the memory plan's sharing."""

    def __init__(self, sched: Schedule, inputs: Sequence[Any]) -> None:
        self.sched = sched
        self.storages: dict[str, torch.Tensor] = {}
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if len(tensors) != len(sched.graph_inputs):
            raise InterpretError(
                f"expected {len(sched.graph_inputs)} tensor inputs, got {len(tensors)}"
            )
        for name, tensor in zip(sched.graph_inputs, tensors, strict=True):
            layout = sched.layout(name)
            want = [static_int(s, "size") for s in layout.size]
            if list(tensor.shape) != want or tensor.dtype != layout.dtype:
                raise InterpretError(
                    f"input {name} is {tensor.dtype}{list(tensor.shape)}, the graph was lowered "
                    f"for {layout.dtype}{want}"
                )
            if tensor.numel() > 1 and not _strides_match(tensor, layout):
                raise InterpretError(
                    f"input {name} has strides {tensor.stride()}, the graph was lowered for "
                    f"{[int(s) for s in layout.stride]}; re-lower for this layout"
                )
            self.storages[name] = _flat_storage(tensor)
        for name, value in sched.constants.items():
            self.storages[name] = _flat_storage(value)

    def allocate(self, name: str) -> None:
        layout = self.sched.layout(name)
        plan = self.sched.allocations.get(name)
        if plan is not None and plan.in_place:  # the input itself, still read by its kernel
            self.storages[name] = self.storages[plan.reuses]
            return
        if plan is not None and plan.reuses is not None:
            self.storages[name] = self.storages.pop(plan.reuses)
            return
        self.storages[name] = torch.empty(
            layout.storage_numel(), dtype=layout.dtype, device=layout.device
        )

    def tensor(self, arg: TensorArg) -> torch.Tensor:
        return _view(self.storages[arg.name], arg.view or self.sched.layout(arg.name))


def _strides_match(t: torch.Tensor, layout: Layout) -> bool:
    return all(
        n <= 1 or st == int(want)
        for n, st, want in zip(t.shape, t.stride(), layout.stride, strict=False)
    )


def _grid(group: KernelGroup, device: torch.device) -> tuple[dict, tuple[int, ...]]:
    outer, red = group.index_vars()
    sizes = [static_int(s, "kernel size") for s in [*group.sizes, *group.reduction_sizes]]
    bindings = {}
    for k, var in enumerate([*outer, *red]):
        shape = [1] * len(sizes)
        shape[k] = sizes[k]
        bindings[var] = torch.arange(sizes[k], device=device).reshape(shape)
    return bindings, tuple(sizes)


def _run_loops(group: KernelGroup, memory: _Memory) -> None:
    device = group.device
    bindings, grid = _grid(group, device)
    if 0 in grid and not group.reduction_sizes:
        return
    n_red = len(group.reduction_sizes)
    for node in group.nodes:
        # An outer node runs once per outer point: bind its grid without reduction dims.
        if node.placement == "outer" and n_red:
            outer_grid = grid[: len(grid) - n_red] + (1,) * n_red
            handler = InterpretHandler(memory.storages, bindings, outer_grid, (), device)
        else:
            reduce_dims = tuple(range(len(grid) - n_red, len(grid)))
            handler = InterpretHandler(memory.storages, bindings, grid, reduce_dims, device)
        node.run(handler)


def _run_extern(kernel: ExternKernel, memory: _Memory) -> None:
    args, kwargs = tree_map(
        lambda a: memory.tensor(a) if isinstance(a, TensorArg) else a, (kernel.args, kernel.kwargs)
    )
    result = kernel.kernel(*args, **kwargs)
    if is_collective(kernel.kernel):
        # results are copied into the interpreter's storage: wait for the data first
        result = torch.ops._c10d_functional.wait_tensor.default(result)
    leaves = result if isinstance(result, (tuple, list)) else [result]
    for out in kernel.outputs:
        _view(memory.storages[out.name], out.layout).copy_(leaves[out.index])


def run_scheduled(sched: Schedule, inputs: Sequence[Any]) -> list[Any]:
    """Run the scheduled graph on ``inputs``; returns the graph's outputs in order."""
    memory = _Memory(sched, inputs)
    for group in sched:
        for name in group.buffer_names():
            memory.allocate(name)
        if group.extern is not None:
            _run_extern(group.extern, memory)
        else:
            _run_loops(group, memory)
    outputs: list[Any] = []
    for spec in sched.graph_outputs:
        if spec.name is None:
            outputs.append(spec.constant)
        else:
            outputs.append(_view(memory.storages[spec.name], spec.layout))
    return outputs
