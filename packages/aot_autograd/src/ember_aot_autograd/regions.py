"""Checkpointed regions: forward values to recompute in the backward rather than save.

A tracer marks the torch-level nodes of an activation-checkpointed region with
`node.meta["recompute"] = <region id>` (ember's tracer does for `torch.utils.checkpoint`).
While the joint trace runs such a graph, each aten-level node it records inherits the mark
of the torch-level node being run (`run_marking_regions`, `current_region`). The
partitioners then recompute a marked value in the backward instead of saving it
(`must_recompute`), as eager's checkpoint does, except:
- random ops: a rerun would draw other numbers (their outputs are saved instead);
- a region's boundary: a value also read by forward code outside its region (the next
  region, the function's outputs) is saved, so that consecutive regions do not recompute
  each other back to the inputs;
- values that are not tensors (tuples, sizes).
"""

from __future__ import annotations

import contextvars
import operator
from typing import Any

import torch
import torch.fx

from ember_aot_autograd.op_kinds import is_random

RECOMPUTE_META = "recompute"
_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("ember_aot_region", default=None)


def current_region() -> Any:
    """The region id of the torch-level node being run (None outside regions)."""
    return _CURRENT.get()


class _RegionInterpreter(torch.fx.Interpreter):
    def run_node(self, n: torch.fx.Node) -> Any:
        token = _CURRENT.set(n.meta.get(RECOMPUTE_META))
        try:
            return super().run_node(n)
        finally:
            _CURRENT.reset(token)


def has_regions(gm: torch.nn.Module) -> bool:
    graph = getattr(gm, "graph", None)
    return isinstance(graph, torch.fx.Graph) and any(RECOMPUTE_META in n.meta for n in graph.nodes)


def run_marking_regions(gm: torch.fx.GraphModule, args: Any) -> Any:
    """`gm(*args)`, node by node, so that the ops each node runs know its region."""
    return _RegionInterpreter(gm).run(*args)


def mark(node: torch.fx.Node) -> None:
    """Gives a node recorded now the region of the torch-level node being run."""
    region = _CURRENT.get()
    if region is not None:
        node.meta[RECOMPUTE_META] = region


def in_region(node: torch.fx.Node) -> bool:
    """An op of a checkpointed region that may run again in the backward (not a random op)."""
    return (
        node.meta.get(RECOMPUTE_META) is not None
        and node.op == "call_function"
        and not is_random(node.target)
    )


def must_recompute(node: torch.fx.Node, forward: set[torch.fx.Node]) -> bool:
    """Whether `node` (a forward value) is recomputed in the backward, never saved.
    `forward`: the nodes the forward outputs depend on."""
    if not in_region(node) or node.target is operator.getitem:
        return False  # an item of a multi-output op: saved where its op is not recomputed
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return False
    region = node.meta[RECOMPUTE_META]
    for user in node.users:
        if user.op == "output":  # a forward output: computed in the forward anyway
            return False
        if user in forward and user.meta.get(RECOMPUTE_META) != region:
            return False  # read by forward code outside the region: its boundary
    return True


def region_boundary(node: torch.fx.Node, forward: set[torch.fx.Node]) -> bool:
    """A tensor of a region that forward code outside it reads: saved, as torch's
    checkpoint saves a region's inputs, so that the next region does not recompute it."""
    return (
        in_region(node)
        and isinstance(node.meta.get("val"), torch.Tensor)
        and not must_recompute(node, forward)
    )
