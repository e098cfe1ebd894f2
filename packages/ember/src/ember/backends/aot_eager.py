"""`aot_eager`: the graph traced through autograd by ember-aot-autograd, decomposed to prims by
ember-primops, and the functional forward and backward graphs run as FX graphs.

It checks the two middle stages on their own: anything it gets wrong is theirs, not codegen's.
What it compiled and ran is counted in `ember.counters["aot_eager"]`; aten ops the table does
not decompose stay in the graphs as they are, counted in `ember.counters["aten_fallbacks"]`;
a graph the stages declare they cannot compile runs eagerly (eager_fallback.py).

Random ops (rand, randn, bernoulli, dropout's mask, normal, uniform_, ...) stay aten ops that
draw from torch's generator, as torch's own aot_eager leaves them: under `torch.manual_seed(k)`
the values, the masks backward reuses and the generator's state afterwards are eager's. The
`inductor` backend decomposes them to its own counter-based stream instead (same
distributions, other numbers), as torch.compile's inductor does unless `fallback_random`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from ember.backends.attention_kernels import explicit_cuda_attention
from ember.backends.attention_masks import fused_attention_masks
from ember.backends.eager_fallback import eager_on_limitation
from ember.backends.frame_hook_off import without_frame_hook
from ember.backends.registry import register_backend
from ember.stats import counters
from ember.trace.hooks import emit
from ember_aot_autograd import aot_module
from ember_primops import decomposition_table

log = logging.getLogger("ember.aot")
#: ops that read sizes (symbolic shapes): part of every graph, no fallback
SIZE_OPS = frozenset({torch.ops.aten.sym_size.int})
COLLECTIVES_NAMESPACE = "_c10d_functional"


def counting_graph_runner(backend: str, kind: str) -> Callable:
    """A compiler that runs the graph as is, counting compiles and runs under `backend`."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        counters[backend][f"{kind}_graphs"] += 1
        count_aten_fallbacks(gm)
        run = gm.forward

        def run_graph(*args):
            counters[backend][f"{kind}_runs"] += 1
            return run(*args)

        return without_frame_hook(run_graph) if kind == "backward" else run_graph

    return compile_graph


def count_collectives(gm: torch.fx.GraphModule) -> None:
    """torch.distributed's functional collectives in a graph: they stay aten ops by design
    (no decomposition; the loop IR makes them extern kernels), counted on their own."""
    for node in gm.graph.nodes:
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target.namespace == COLLECTIVES_NAMESPACE:
            counters["collectives"][str(target)] += 1


def count_aten_fallbacks(gm: torch.fx.GraphModule) -> None:
    """Aten ops the decomposition table left in a graph: counted, never silent (and the
    collectives, counted apart)."""
    count_collectives(gm)
    for node in gm.graph.nodes:
        target = node.target
        is_op = node.op == "call_function" and isinstance(target, torch._ops.OpOverload)
        if is_op and target.namespace == COLLECTIVES_NAMESPACE:
            continue
        if is_op and target.namespace != "ember_prims" and target not in SIZE_OPS:
            counters["aten_fallbacks"][str(target)] += 1
            emit("fallback", kind="aten", op=str(target), count=1)
            log.info("aten op without decomposition kept in the graph: %s", target)


@register_backend("aot_eager", symbolic_sizes=True)
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    return eager_on_limitation("aot_eager", _aot_eager)(gm, example_inputs)


def _aot_eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    fused_attention_masks(gm)
    explicit_cuda_attention(gm)
    return aot_module(
        gm,
        example_inputs,
        fw_compiler=counting_graph_runner("aot_eager", "forward"),
        bw_compiler=counting_graph_runner("aot_eager", "backward"),
        decompositions=decomposition_table(random=False),
    )
