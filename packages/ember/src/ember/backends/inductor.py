"""`inductor`: the whole pipeline, one named stage after another: `print(STAGES)`.

The first two stages run once per torch-level graph; aot hands each prim graph it makes
(forward, backward or inference) to the stages after it, through the compilers it is given
(`PrimCompiler`). Each stage is timed under its name (the compile report's stage chart),
checked at its boundary where a checker exists, and logs under `EMBER_LOGS` by its own name
(graph, aot, ir, fusion, output_code). What ran is counted in `ember.counters["inductor"]`;
prims without a loop-IR lowering (run through their reference implementation) in
`ember.counters["inductor_fallbacks"]`, aten ops without a decomposition in
`ember.counters["aten_fallbacks"]`; graphs the stages declare they cannot compile run
eagerly, counted in `ember.counters["graph_fallbacks"]` (eager_fallback.py). A `t.item()`
read (capture_scalar_outputs) is bound on the host by the wrapper and passed to kernels as a
size or scalar argument (ember_inductor_ir's lowering/scalar_reads.py).

`ember.compile(mode=..., options=...)` configures it (inductor_settings.py): the codegen target,
autotuning, and CUDA graphs for GPU graphs (`mode="reduce-overhead"`, cudagraphs.py).

Compiled artifacts are cached on disk in two levels (see artifact_cache.py): `aot` (torch-level
graph + inputs -> prim graphs + runtime plan; counted as cache_hits / cache_misses /
cache_bypasses) and `codegen` (prim graph -> generated code; codegen_cache_*). A warm start
skips tracing, partitioning, lowering, scheduling and code generation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

import ember.backends.artifact_cache as artifact_cache
import ember.backends.inductor_cache as codegen_cache
import ember.backends.prim_stages as prim_stages
from ember.backends.aot_artifact import AotArtifacts
from ember.backends.attention_kernels import explicit_cuda_attention
from ember.backends.attention_masks import fused_attention_masks
from ember.backends.eager_fallback import eager_on_limitation
from ember.backends.foreign_sizes import has_foreign_sizes
from ember.backends.inductor_settings import InductorSettings, inductor_settings
from ember.backends.inductor_target import (
    DEFAULT_SETTINGS,
    MixedDeviceGraph,
    codegen_target,
    target_of,
)
from ember.backends.pipeline import Pipeline, Stage
from ember.backends.prim_stages import PrimGraph, finished_runner, lint
from ember.backends.registry import (
    BEFORE_TRACE_ATTR,
    register_backend,
    register_backend_configuration,
)
from ember.backends.saved_layouts import SavedLayouts
from ember.backends.size_specialization import SizeSpecializer, has_symbolic_sizes
from ember.trace.kernels import emit_kernels, traced_graph
from ember_aot_autograd import (
    INPUT_WRITES_META,
    aot_module,
    graph_from_source,
    min_cut_rematerialization_partition,
)
from ember_aot_autograd.passes import PassedPartition
from ember_codegen import start_build_workers
from ember_inductor_ir import DynamicShapeUnsupported, ScalarReadUnsupported
from ember_primops import decomposition_table

__all__ = [
    "STAGES",
    "MixedDeviceGraph",
    "PrimCompiler",
    "TorchGraph",
    "codegen_target",
    "compile_graph_source",
    "compile_prim_graph",
    "configure_inductor",
    "inductor",
]


@dataclass
class TorchGraph:
    """The torch-level graph the backend was handed, on its way through trace and aot."""

    gm: torch.fx.GraphModule
    example_inputs: list
    settings: InductorSettings
    runner: Callable | None = field(default=None, repr=False)  # aot's runtime wrapper


def _reads_scalars(gm: torch.fx.GraphModule) -> bool:
    """Whether a prim graph reads a tensor's value on the host (`t.item()`): its unbacked
    symbols are bound by those reads (lowering/scalar_reads.py), never by a size of an
    input, so no static specialization per size can serve it."""
    read = torch.ops.aten._local_scalar_dense.default
    return any(n.op == "call_function" and n.target is read for n in gm.graph.nodes)


def receive_graph(work: TorchGraph) -> None:
    """The tracer's (or Dynamo's) graph, attention masks that keep aten off its fused
    kernels dropped or made dense (attention_masks.py), CUDA attention of symbolic size made
    an explicit kernel call (attention_kernels.py). A graph reading a tensor's value into a
    Python scalar (`t.item()`) goes on: the loop IR binds the value on the host where it
    can (lowering/scalar_reads.py) and declares the rest (ScalarReadUnsupported)."""
    fused_attention_masks(work.gm)
    explicit_cuda_attention(work.gm)


def run_aot(work: TorchGraph) -> None:
    """ember-aot-autograd: forward and backward traced as one joint graph, decomposed to
    prims while traced (ember-primops' table), partitioned by min-cut, saved activations
    kept in their computed layout (saved_layouts.py); each prim graph compiled by the
    stages after this one. Variants are looked up in the aot artifact cache first."""
    settings = work.settings
    decompositions = decomposition_table()
    partition_fn = PassedPartition(min_cut_rematerialization_partition, [SavedLayouts(settings)])
    store = None
    if artifact_cache.enabled():
        compile_source = functools.partial(compile_graph_source, settings=settings)
        store = AotArtifacts(work.gm, decompositions, partition_fn, compile_source)
    work.runner = aot_module(
        work.gm,
        work.example_inputs,
        fw_compiler=PrimCompiler("forward", settings),
        bw_compiler=PrimCompiler("backward", settings),
        decompositions=decompositions,
        partition_fn=partition_fn,
        artifact_store=store,
        # the caller (our tracer, or Dynamo: the backend convention) guards the inputs' kinds
        inputs_guarded=True,
    )


#: The inductor backend, stage by stage.
STAGES = Pipeline(
    Stage("trace", receive_graph, check=lint, checked_by="FX lint", logs="graph"),
    Stage("aot", run_aot, checked_by="each prim graph functional, with values", logs="aot"),
    Stage("passes", prim_stages.run_passes, check=lint, checked_by="FX lint"),
    Stage("codegen_cache", prim_stages.look_up_code),
    Stage("decompose", prim_stages.keep_aten_fallbacks, logs="aot"),
    Stage("lower", prim_stages.lower_graph, checked_by="loop-IR verifier, in lower", logs="ir"),
    Stage("schedule", prim_stages.schedule_graph, logs="fusion"),
    Stage("codegen", prim_stages.generate_code, logs="output_code"),
)


class PrimCompiler:
    """aot's compiler for one kind of prim graph: the stages after aot. A graph with
    symbolic sizes that the loop IR cannot compile symbolically gets one static compile per
    concrete size signature (size_specialization.py)."""

    def __init__(self, kind: str, settings: InductorSettings = DEFAULT_SETTINGS) -> None:
        self.kind = kind
        self.settings = settings

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        try:  # aot's own call: a backward is handed its inputs (releases_inputs)
            release = codegen_cache.releases_inputs(self.kind, self.settings)
            return self.static(gm, example_inputs, release_inputs=release)
        except DynamicShapeUnsupported as reason:
            if _reads_scalars(gm):  # symbols bound by a read: a declared limitation
                raise ScalarReadUnsupported(f"a graph reading scalars: {reason}") from reason
            if not has_symbolic_sizes(gm):
                raise
            limit = self.settings.dynamic_specializations
            return SizeSpecializer(gm, self.kind, self.static, limit, str(reason))

    def static(
        self, gm: torch.fx.GraphModule, example_inputs: list, release_inputs: bool = False
    ) -> Callable:
        """The stages from `passes` on, once (raises DynamicShapeUnsupported). Parts of a
        graph and size specializations keep their inputs (their callers call them)."""
        work = PrimGraph(self.kind, gm, example_inputs, self.settings, self.static)
        work.release_inputs = release_inputs and not has_symbolic_sizes(gm)
        return STAGES.run(work, start="passes")


def compile_prim_graph(kind: str, settings: InductorSettings = DEFAULT_SETTINGS) -> Callable:
    """An aot compiler: prim-level graph -> loop IR -> scheduled kernels -> compiled code."""
    return PrimCompiler(kind, settings)


def compile_graph_source(
    kind: str,
    source,
    settings: InductorSettings = DEFAULT_SETTINGS,
    input_writes: tuple = (),
) -> Callable:
    """A prim graph from the aot artifact cache -> compiled code (codegen cache first; on a
    miss the graph is rebuilt from its source and compiled as usual). ``input_writes``: its
    INPUT_WRITES_META, which the source does not carry (the aot plan tells it)."""
    target = target_of({layout[3].split(":")[0] for layout in source.inputs}, settings)
    writes = tuple(input_writes)
    released = codegen_cache.releases_inputs(kind, settings)  # aot's call (static graphs)
    hit = codegen_cache.lookup_source(
        source, codegen_cache.target_key(target, settings, kind, writes, released)
    )
    if hit is not None:
        compiled, aten, notes = hit
        emit_kernels(traced_graph(kind, source), None, compiled, target, notes)
        return finished_runner(
            kind, compiled, target, settings, writes, aten, owns_arguments=released
        )
    gm = graph_from_source(source)
    gm.meta[INPUT_WRITES_META] = writes
    example_inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    return PrimCompiler(kind, settings)(gm, example_inputs)


@register_backend_configuration("inductor")
def configure_inductor(mode: str | None, options: dict | None) -> Callable:
    """The inductor backend with `ember.compile`'s mode and options applied."""
    settings = inductor_settings(mode, options)
    return functools.partial(inductor, settings=settings)


@register_backend("inductor", symbolic_sizes=True)
def inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[torch.Tensor],
    settings: InductorSettings | None = None,
) -> Callable:
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs):
        start_build_workers()  # Triton's build workers start while this graph is lowered
    compile_fn = eager_on_limitation("inductor", functools.partial(_inductor, settings=settings))
    if has_foreign_sizes(example_inputs):  # Dynamo's dynamic sizes: one compile per size
        limit = (settings or DEFAULT_SETTINGS).dynamic_specializations
        return SizeSpecializer(gm, "dynamo", compile_fn, limit, "sizes of another shape env")
    return compile_fn(gm, example_inputs)


def _start_builds_where_cuda_runs() -> None:
    """Before a frame is traced (registry.BEFORE_TRACE_ATTR): where this process uses CUDA,
    Triton's build workers start now and import torch and Triton while the frame is traced,
    ready when its kernels are (started at the graph's lowering, they were still importing:
    a BERT's 15 kernels took 6.8 s in the workers on the H200 host, a build 0.15-0.8 s)."""
    if torch.cuda.is_initialized():
        start_build_workers()


setattr(inductor, BEFORE_TRACE_ATTR, _start_builds_where_cuda_runs)


def _inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[torch.Tensor],
    settings: InductorSettings | None = None,
) -> Callable:
    settings = settings or inductor_settings()  # EMBER_INDUCTOR_TARGET applies to the default
    return STAGES.run(TorchGraph(gm, example_inputs, settings))
