"""Branches on a tensor whose value the trace can bound without knowing it.

A uniform draw (`torch.rand`, `torch.rand_like`: values in [0, 1], the closed interval so that
rounding in low precision is covered) compared with a constant outside that interval gives the
same answer whatever the draw: HF's LayerDrop in training, `if torch.rand([]) < self.layerdrop`
with a layerdrop of 0, never skips a layer. The draw and the comparison stay in the graph (the
random stream advances as in eager); the branch is taken at trace time. The constant is part
of the graph (guarded where it came from). Anything else, a draw or a comparison result that
other nodes use (an in-place update could change it), several elements, is still a graph
break.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import torch.fx

    from ember_bytecode_tracer.variables.tensor import TensorVariable

_UNIFORM = {torch.rand: (0.0, 1.0), torch.rand_like: (0.0, 1.0)}
_COMPARISONS = {
    operator.lt: "lt", torch.lt: "lt", operator.le: "le", torch.le: "le",
    operator.gt: "gt", torch.gt: "gt", operator.ge: "ge", torch.ge: "ge",
}  # fmt: skip
_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def decided_truth(value: TensorVariable) -> bool | None:
    """bool(value) when the trace can tell it whatever the random draw, else None."""
    node = value.node
    if node.op != "call_function" or node.target not in _COMPARISONS or node.users:
        return None
    if value.example.numel() != 1 or node.kwargs or len(node.args) != 2:
        return None
    op, (left, right) = _COMPARISONS[node.target], node.args
    if _is_number(left) and not _is_number(right):
        op, left, right = _SWAPPED[op], right, left
    interval = _uniform_interval(left)
    if interval is None or not _is_number(right):
        return None
    return _compare(op, interval, float(right))


def _is_number(value: object) -> bool:
    return type(value) in (int, float, bool)


def _uniform_interval(node: object) -> tuple[float, float] | None:
    """The values a fresh uniform draw can hold, if `node` is one read by nothing but
    comparisons (no view or in-place update of it in the graph)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    interval = _UNIFORM.get(node.target)
    example = node.meta.get("example_value")
    if interval is None or not isinstance(example, torch.Tensor):
        return None
    if not example.dtype.is_floating_point:
        return None
    if any(user.target not in _COMPARISONS for user in node.users):
        return None
    return interval


def _compare(op: str, interval: tuple[float, float], c: float) -> bool | None:
    low, high = interval
    if math.isnan(c):
        return False
    if op == "lt":
        return True if high < c else False if low >= c else None
    if op == "le":
        return True if high <= c else False if low > c else None
    if op == "gt":
        return True if low > c else False if high <= c else None
    return True if low >= c else False if high < c else None  # ge
