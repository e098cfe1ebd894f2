"""A prim graph run op by op, each prim through its implementation itself.

A graph that the code generators do not take (one that mixes CPU and GPU values, say an
optimizer step whose step counters stay on the CPU) runs as an FX graph. Called through the
dispatcher, every prim first runs its meta function on meta copies of its arguments (the
check that makes the prims safe to call by hand): tens of microseconds a call, thousands of
calls for an optimizer over a model's parameters. The graph was traced with those same
checks, and its inputs are guarded, so here each prim node calls its implementation
directly; its result gets the strides the trace recorded (what the checked call does), so
the views that follow read what they read in the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from ember_primops import get_prim, is_prim

__all__ = ["with_direct_prims"]


def _concrete_strides(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, torch.Tensor):
        return None
    strides = value.stride()
    if any(not isinstance(s, int) for s in (*strides, *value.shape)):
        return None  # symbolic: decided by the checked call
    return tuple(strides)


def _laid_out(out: Any, strides: tuple[int, ...]) -> Any:
    if not isinstance(out, torch.Tensor) or out.stride() == strides or out.numel() == 0:
        return out
    fresh = torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device)
    return fresh.copy_(out)


def _direct_call(node: torch.fx.Node) -> Callable | None:
    """The node's direct call, or None where the checked call must stay."""
    prim = get_prim(node.target)
    if prim.is_view:
        return prim.impl  # a view returns its aliasing result untouched
    expected = node.meta.get("val")
    if isinstance(expected, (tuple, list)):
        layouts = [_concrete_strides(v) for v in expected]
        if any(
            s is None and isinstance(v, torch.Tensor)
            for s, v in zip(layouts, expected, strict=True)
        ):
            return None
        impl = prim.impl

        def call_many(*args: Any, **kwargs: Any) -> Any:
            out = impl(*args, **kwargs)
            return type(out)(
                o if s is None else _laid_out(o, s) for o, s in zip(out, layouts, strict=True)
            )

        return call_many
    strides = _concrete_strides(expected)
    if strides is None:
        return None if isinstance(expected, torch.Tensor) else prim.impl
    impl = prim.impl

    def call_one(*args: Any, **kwargs: Any) -> Any:
        return _laid_out(impl(*args, **kwargs), strides)

    return call_one


def with_direct_prims(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose prim nodes call their implementations directly."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for node in graph.nodes:
        if node.op == "call_function" and is_prim(node.target):
            call = _direct_call(node)
            if call is not None:
                node.target = call
    return torch.fx.GraphModule(gm, graph)
