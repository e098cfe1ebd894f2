"""The inductor backend's stages after aot, one prim graph (forward, backward or inference) at
a time: passes -> codegen_cache -> decompose -> lower -> schedule -> codegen (the list and
its order live in inductor.py's STAGES). Each stage is a function of the graph's `PrimGraph`
record; the one that finishes the graph sets its `runner`: the compiled code as it runs
(under CUDA graphs where asked, counted in `ember.counters["inductor"]`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import ember.backends.inductor_cache as codegen_cache
import ember_codegen
import ember_inductor_ir
from ember.backends.aot_eager import (
    COLLECTIVES_NAMESPACE,
    count_aten_fallbacks,
    counting_graph_runner,
)
from ember.backends.cudagraphs import CudaGraphRunner
from ember.backends.direct_prims import with_direct_prims
from ember.backends.frame_hook_off import without_frame_hook
from ember.backends.inductor_settings import InductorSettings
from ember.backends.inductor_target import MixedDeviceGraph, codegen_target, devices_of
from ember.backends.size_specialization import has_symbolic_sizes
from ember.backends.symbolic_key import shape_env_of
from ember.stats import counters
from ember.trace.kernels import (
    FUSION_LOG,
    captured_log,
    emit_fallbacks,
    emit_kernels,
    emit_loop_ir,
    kernel_notes,
)
from ember_aot_autograd import INPUT_WRITES_META
from ember_aot_autograd.passes import HostSplit, move_scalar_work, split_host_outputs

log = logging.getLogger("ember.cache")  # the inductor backend's, where its warnings went

__all__ = [
    "PrimGraph",
    "choose_target",
    "finished_runner",
    "generate_code",
    "keep_aten_fallbacks",
    "look_up_code",
    "lower_graph",
    "schedule_graph",
]


@dataclass
class PrimGraph:
    """One prim graph on its way through the stages; each fills in what it made."""

    kind: str  # forward | backward | inference
    gm: torch.fx.GraphModule
    example_inputs: list
    settings: InductorSettings
    #: the prim stages again, for a part of this graph (host_outputs' host and device graphs)
    compile_part: Callable[[torch.fx.GraphModule, list], Callable]
    target: str = ""
    writes: tuple = ()  # INPUT_WRITES_META: outputs the graph may write into its inputs
    placement: str = ""  # why CPU work stayed on the CPU (device_placement), for the log
    key: str | None = None  # its codegen cache key (None: not cached)
    env: Any = None  # the shape env of its sizes, where keyed
    lowering: Any = None
    scheduled: Any = None
    notes: dict = field(default_factory=dict)  # for the compile report, kept with the code
    runner: Callable | None = field(default=None, repr=False)  # set when the graph is done
    #: aot hands the inputs over (inductor_cache.releases_inputs): the wrapper empties the
    #: list it is called with and drops each input after its last use
    release_inputs: bool = False


def lint(work: Any) -> None:
    """FX's structural check of the graph a stage hands on."""
    work.gm.graph.lint()


# -- passes: ember_aot_autograd.passes, then the code generator for where the graph runs --


def run_passes(work: PrimGraph) -> None:
    """ember_aot_autograd.passes on a graph with values on the CPU and a GPU: host_outputs
    (its CPU outputs cut into a host graph of their own, each part compiled by the stages
    from here) or device_placement (its CPU values made only from CPU scalars computed on
    the GPU instead); then its code generator chosen."""
    gm = work.gm
    if {"cpu", "cuda"} <= devices_of(gm):
        # (a graph with symbolic sizes may still be specialized per size: left whole)
        split = "symbolic sizes" if has_symbolic_sizes(gm) else split_host_outputs(gm)
        if isinstance(split, HostSplit):  # CPU outputs computed by a host graph
            counters["inductor"]["host_output_splits"] += 1
            split.carry_input_writes(gm.meta.get(INPUT_WRITES_META, ()))
            _count_moved(move_scalar_work(split.device))
            host = work.compile_part(
                split.host, [work.example_inputs[i] for i in split.host_inputs]
            )
            inputs = [work.example_inputs[i] for i in split.device_inputs]
            work.runner = split.runner(host, work.compile_part(split.device, inputs))
            return
        # CPU values made only from CPU scalars: computed on the GPU instead
        work.placement = _count_moved(move_scalar_work(gm))
    choose_target(work)


def _count_moved(placed: tuple[int, str]) -> str:
    moved, reason = placed
    if moved:
        counters["inductor"]["cpu_scalar_work_moved"] += moved
    return reason


def choose_target(work: PrimGraph) -> None:
    """The code generator for the graph's device; a graph with real work on two devices runs
    as an FX graph, each prim called directly (direct_prims.py), counted and logged."""
    try:
        work.target = codegen_target(work.gm, work.settings)
    except MixedDeviceGraph as reason:  # correct but not generated: counted and logged
        log.warning("%s graph runs as an FX graph: %s (%s)", work.kind, reason, work.placement)
        counters["inductor_fallbacks"]["mixed_device_graph"] += 1
        compile_fx = counting_graph_runner("inductor", work.kind)
        work.runner = compile_fx(with_direct_prims(work.gm), work.example_inputs)
        return
    work.writes = tuple(work.gm.meta.get(INPUT_WRITES_META, ()))  # outputs it may write


# -- codegen_cache: the code generated for this graph before, on disk --------------------


def look_up_code(work: PrimGraph) -> None:
    """The graph's code from the codegen artifact cache, where stored: finishes the graph."""
    target_key = codegen_cache.target_key(
        work.target, work.settings, work.kind, work.writes, work.release_inputs
    )
    work.key = codegen_cache.codegen_key(work.gm, target_key)
    if work.key is None:
        return
    work.env = shape_env_of(work.gm)
    hit = codegen_cache.lookup(work.key, work.env)
    if hit is not None:
        compiled, aten, notes = hit
        emit_kernels(work.gm, None, compiled, work.target, notes)
        work.runner = finished_runner(
            work.kind, compiled, work.target, work.settings, work.writes, aten,
            owns_arguments=work.release_inputs,
        )  # fmt: skip


# -- decompose, lower, schedule, codegen --------------------------------------------------


def keep_aten_fallbacks(work: PrimGraph) -> None:
    """ember-primops' table was applied while aot traced (timed there, as `decompose`); the
    aten ops it left in the graph are counted and logged here, never silent."""
    count_aten_fallbacks(work.gm)


def lower_graph(work: PrimGraph) -> None:
    """The prim graph as loop IR for the target (ember_inductor_ir.lower verifies it)."""
    work.lowering = ember_inductor_ir.lower(
        work.gm, work.example_inputs, target=work.target, input_writes=work.writes
    )


def schedule_graph(work: PrimGraph) -> None:
    """Fusion into kernels and the buffer plan (outputs written in place counted)."""
    with captured_log(FUSION_LOG, always=True) as fusion:  # the decisions, for the report
        work.scheduled = ember_inductor_ir.schedule(
            work.lowering, release_inputs=work.release_inputs
        )
    # kept with the cached code: a warm start's report shows the loop IR and decisions too,
    # though the cold compile wrote no trace
    work.notes = kernel_notes(work.scheduled)
    work.notes.update(loop_ir=ember_inductor_ir.dump_lowering(work.lowering), fusion=fusion)
    emit_loop_ir(work.gm, work.notes)
    inputs = set(work.scheduled.graph_inputs)
    in_place = sum(a.in_place and a.reuses in inputs for a in work.scheduled.allocations.values())
    if in_place:  # outputs written into the inputs they go back to (reuse.py)
        counters["inductor"]["outputs_written_in_place"] += in_place


def generate_code(work: PrimGraph) -> None:
    """C++/OpenMP or Triton code for the schedule, stored in the codegen cache: finishes
    the graph."""
    options = codegen_cache.codegen_options(work.target, work.settings, work.kind)
    compiled = ember_codegen.compile_graph(work.scheduled, target=work.target, **options)
    emit_kernels(work.gm, work.scheduled, compiled, work.target)
    if work.key is not None:
        codegen_cache.store(work.key, compiled, work.gm, work.env, work.notes)
    fallbacks = work.scheduled.fallback_counts
    work.runner = finished_runner(
        work.kind, compiled, work.target, work.settings, work.writes, {}, fallbacks,
        owns_arguments=work.release_inputs,
    )  # fmt: skip


# -- the compiled graph as it runs --------------------------------------------------------


def finished_runner(
    kind: str,
    compiled: Any,
    target: str,
    settings: InductorSettings,
    writes: tuple,
    aten: dict,
    fallbacks: dict | None = None,
    *,
    owns_arguments: bool = False,
) -> Callable:
    """The compiled graph as aot calls it, counted (`fallbacks`: prims run through their
    reference implementation; None: the code's own record, as a cache hit has it).
    `owns_arguments`: its code releases its inputs; it is called with one list of them,
    which it empties (aot's convention for such a compiled graph)."""
    compiled = _finish(compiled, target, settings, kind, writes)
    if fallbacks is None:
        fallbacks = compiled.fallback_counts
    return _counted_runner(kind, compiled, fallbacks, aten, owns_arguments)


def _finish(
    compiled: Callable, target: str, settings: InductorSettings, kind: str, writes: tuple = ()
) -> Callable:
    """The compiled graph as it runs: replayed as CUDA graphs under reduce-overhead, unless
    it writes its inputs in place (an optimizer step: its capture would run it once more on
    the real parameters, and a replay would copy every moment and gradient into static
    buffers and the results back, where in place it writes each once)."""
    if writes and settings.cudagraphs and target == "triton":
        counters["cudagraphs"]["in_place_graphs_uncaptured"] += 1
        return compiled
    if settings.cudagraphs and target == "triton" and torch.cuda.is_available():
        return CudaGraphRunner(compiled, kind, max_sizes=settings.cudagraph_sizes)
    return compiled


def _is_collective(op: str) -> bool:
    return op.startswith(f"{COLLECTIVES_NAMESPACE}.")


def _counted_runner(
    kind: str, compiled: Callable, fallbacks: dict, aten: dict, owns_arguments: bool = False
) -> Callable:
    stats = counters["inductor"]
    stats[f"{kind}_graphs"] += 1
    stats["kernels"] += getattr(compiled, "kernel_count", 0)  # launches a call makes
    if combined := getattr(compiled, "combined_kernels", 0):  # kernels sharing launches
        stats["kernels_combined"] += combined
    for prim, count in fallbacks.items():
        counters["inductor_fallbacks"][str(prim)] += count
    for op, count in aten.items():
        counters["collectives" if _is_collective(op) else "aten_fallbacks"][op] += count
    emit_fallbacks(fallbacks, {op: n for op, n in aten.items() if not _is_collective(op)})

    runs = f"{kind}_runs"
    launches = getattr(compiled, "kernel_count", 0)

    def run_owning(args):
        stats[runs] += 1
        if launches:  # kernels a call launches: a step's count is the difference over it
            stats["kernel_launches"] += launches
        # a compiled graph takes any sequence (no copy to a list); one that releases its
        # inputs empties the list, dropping each input when done with it
        return compiled(args)

    def run(*args):
        return run_owning(args)

    runner = run_owning if owns_arguments else run
    if kind == "backward":
        runner = without_frame_hook(runner)
    runner.owns_arguments = owns_arguments
    return runner
