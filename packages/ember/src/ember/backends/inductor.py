"""`inductor`: the whole pipeline, one named stage after another.

    trace (the tracer, upstream) -> aot (ember-aot-autograd: joint forward/backward, functional,
    min-cut partition) -> decompose (ember-primops' table, applied while tracing) -> lower
    (ember-inductor-ir) -> schedule (fusion, buffer reuse) -> codegen (ember-codegen: C++/OpenMP
    on CPU, Triton on GPU)

Each stage logs under `EMBER_LOGS` by its own name (aot, ir, fusion, output_code). What ran is
counted in `ember.counters["inductor"]`; prims without a loop-IR lowering (run through their
reference implementation) in `ember.counters["inductor_fallbacks"]`, aten ops without a
decomposition in `ember.counters["aten_fallbacks"]`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ember.backends.aot_eager import count_aten_fallbacks
from ember.backends.registry import register_backend
from ember.exc import EmberError
from ember.stats import counters

TARGETS = {"cpu": "cpp", "cuda": "triton"}  # device type -> ember-codegen target


def codegen_target(gm: torch.fx.GraphModule) -> str:
    """The code generator for the devices the graph's tensors live on."""
    devices = {
        node.meta["val"].device.type
        for node in gm.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }
    devices.discard("meta")
    targets = {TARGETS.get(d) for d in devices} or {"cpp"}
    if None in targets or len(targets) > 1:
        raise EmberError(
            f"the inductor backend compiles graphs on one of {sorted(TARGETS)}, got tensors on "
            f"{sorted(devices)}; use backend='aot_eager' for other devices"
        )
    return targets.pop()


def compile_prim_graph(kind: str) -> Callable:
    """An aot compiler: prim-level graph -> loop IR -> scheduled kernels -> compiled code."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        from ember_codegen import compile_graph as codegen
        from ember_inductor_ir import lower, schedule

        count_aten_fallbacks(gm)
        lowering = lower(gm, example_inputs)  # stage: lower
        scheduled = schedule(lowering)  # stage: schedule
        compiled = codegen(scheduled, target=codegen_target(gm))  # stage: codegen
        stats = counters["inductor"]
        stats[f"{kind}_graphs"] += 1
        stats["kernels"] += getattr(compiled, "kernel_count", 0)
        for prim, count in scheduled.fallback_counts.items():
            counters["inductor_fallbacks"][str(prim)] += count

        def run(*args):
            stats[f"{kind}_runs"] += 1
            return compiled(list(args))

        return run

    return compile_graph


@register_backend("inductor")
def inductor(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    from ember_aot_autograd import aot_module, min_cut_rematerialization_partition
    from ember_primops import decomposition_table

    return aot_module(  # stages: aot + decompose
        gm,
        example_inputs,
        fw_compiler=compile_prim_graph("forward"),
        bw_compiler=compile_prim_graph("backward"),
        decompositions=decomposition_table(),
        partition_fn=min_cut_rematerialization_partition,
    )
