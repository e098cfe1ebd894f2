"""torch.distributed functional collectives as extern kernels.

A collective (`_c10d_functional.all_reduce`, `all_gather_into_tensor`,
`reduce_scatter_tensor`, `broadcast`, `all_to_all_single`) is an extern kernel that starts
the communication and returns the tensor it will fill; `wait_tensor` is a second extern
kernel that waits for it and returns the same tensor (it aliases the collective's output).
The wait also takes the collective's tensor inputs, only so that their buffers live until
the communication is over (the backend may read them after the collective's call returns).
The scheduler moves each collective as early and each wait as late as their data allow
(scheduler/collectives.py), so independent kernels run while the communication is in flight.
"""

from __future__ import annotations

from typing import Any

import torch

from ..extern import ExternKernel, ExternOutput
from .registry import register_lowering

#: the ops that start a collective (their `wait_tensor` ends it)
COLLECTIVE_NAMES = (
    "all_reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "broadcast",
    "all_to_all_single",
)


def collective_ops() -> frozenset:
    ops = getattr(torch.ops, "_c10d_functional", None)
    if ops is None:
        return frozenset()
    return frozenset(getattr(ops, name).default for name in COLLECTIVE_NAMES if hasattr(ops, name))


def is_collective(kernel: Any) -> bool:
    """Whether an extern kernel starts a collective (an op or its overload packet)."""
    if isinstance(kernel, torch._ops.OpOverloadPacket):
        kernel = getattr(kernel, "default", None)
    return kernel in collective_ops()


def wait_collective(result: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """Waits for the collective filling ``result``; ``inputs`` only keep buffers alive."""
    return torch.ops._c10d_functional.wait_tensor.default(result)


def lower_collective(ctx: Any, *args: Any, **kwargs: Any) -> Any:
    return ctx.extern(ctx.current_node.target, args, kwargs)


def lower_wait(ctx: Any, result: Any) -> Any:
    arg = ctx.tensor_arg(result)
    start = _extern_writing(ctx, arg.name)
    inputs = [] if start is None else [a for a in start.tensor_args() if a.name != arg.name]
    out = ctx.extern(wait_collective, [result], {}, mutates=arg.name)
    wait = ctx.operations[-1]
    wait.args = (arg, *inputs)
    return out


def _extern_writing(ctx: Any, name: str) -> ExternKernel | None:
    buffer = ctx.buffers.get(name)
    if not isinstance(buffer, ExternOutput):
        return None
    for op in reversed(ctx.operations):
        if isinstance(op, ExternKernel) and any(o.name == name for o in op.outputs):
            return op
    return None


for _op in collective_ops():
    register_lowering(_op)(lower_collective)
if hasattr(torch.ops, "_c10d_functional"):
    register_lowering(torch.ops._c10d_functional.wait_tensor.default)(lower_wait)
