"""Fold ``x + index_put(zeros, indices, values, accumulate=True)`` into
``index_put(x, indices, values, accumulate=True)``.

An embedding's gradient is a scatter-add into a zero-filled table, and a tied embedding (a
language model's input embedding that is also its output projection) adds it to the
projection's weight gradient: a table-sized fill, scatter and add where one in-place
scatter into the matmul's result does the work (the table is 50257 x 768 floats in gpt2).
Float addition is reassociated (``x[i] + v`` instead of ``x[i] + (0 + v)``), as any
accumulation order may be.
"""

from __future__ import annotations

import torch
import torch.fx

from .lowering.registry import prim_name


def _is_prim(node: object, name: str) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and prim_name(node.target) == name
    )


def _val(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _same_tensor_type(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (
        a is not None
        and b is not None
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
    )


def _scatter_into_zeros(node: object) -> bool:
    """An accumulating ``index_put`` into a ``full(..., 0)`` that nothing else reads."""
    if not _is_prim(node, "index_put") or len(node.users) != 1:
        return False
    base, accumulate = node.args[0], node.args[3] if len(node.args) > 3 else False
    return accumulate is True and _is_prim(base, "full") and base.args[1] == 0


def scatter_adds(graph: torch.fx.Graph) -> dict[torch.fx.Node, tuple[torch.fx.Node, int]]:
    """``{add node: (scatter node, position of the other addend)}`` for each foldable add."""
    folds: dict[torch.fx.Node, tuple[torch.fx.Node, int]] = {}
    for node in graph.nodes:
        if not _is_prim(node, "add") or len(node.args) != 2 or node.kwargs:
            continue
        for k in (0, 1):
            scatter, other = node.args[k], node.args[1 - k]
            if scatter is other or not _scatter_into_zeros(scatter):
                continue
            out = _val(node)
            if _same_tensor_type(_val(other), out) and _same_tensor_type(_val(scatter), out):
                folds[node] = (scatter, 1 - k)
                break
    return folds
