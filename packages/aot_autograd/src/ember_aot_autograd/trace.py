"""The inference trace: a function -> one functional aten-level graph, no backward."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ember_aot_autograd.session import TraceInfo, TraceSession
from ember_aot_autograd.tracer import DecompositionTable

META_KEY = "ember_aot"  # gm.meta[META_KEY]: the TraceInfo of a traced graph


def trace_to_aten(
    fn: Callable,
    example_inputs: Sequence[Any],
    decompositions: DecompositionTable | None = None,
    *,
    strict: bool = False,
    shape_env: Any = None,
) -> torch.fx.GraphModule:
    """Traces `fn(*example_inputs)` under fake tensors, with grad mode off, into a functional
    aten-level graph (or lower, per `decompositions`) with node.meta['val'] on every node.

    The graph takes the tensor inputs in order and returns (new values of the inputs the
    function writes..., tensor outputs...); gm.meta['ember_aot'] (a TraceInfo) says which
    inputs are written and how to rebuild the function's output (see runtime.py).
    """
    session = TraceSession(decompositions, strict, shape_env)
    inputs = session.make_inputs(example_inputs, [False] * len(example_inputs), "arg")
    with session.fake_mode, session.dispatch():
        with session.tracer, torch.no_grad():
            output = fn(*inputs)
        collected = session.collect(output)
    gm = session.build_module([*collected.mutation_nodes, *collected.user_nodes])
    info: TraceInfo = session.info(collected)
    gm.meta[META_KEY] = info
    return gm
