"""`inductor`: the whole pipeline, one named stage after another.

    trace (the tracer, upstream) -> aot (ember-aot-autograd: joint forward/backward, functional,
    min-cut partition) -> decompose (ember-primops' table, applied while tracing) -> lower
    (ember-inductor-ir) -> schedule (fusion, buffer reuse) -> codegen (ember-codegen: C++/OpenMP
    on CPU, Triton on GPU)

Each stage logs under `EMBER_LOGS` by its own name (aot, ir, fusion, output_code). What ran is
counted in `ember.counters["inductor"]`; prims without a loop-IR lowering (run through their
reference implementation) in `ember.counters["inductor_fallbacks"]`, aten ops without a
decomposition in `ember.counters["aten_fallbacks"]`; graphs the stages declare they cannot
compile run eagerly, counted in `ember.counters["graph_fallbacks"]` (eager_fallback.py).

`ember.compile(mode=..., options=...)` configures it (inductor_settings.py): the codegen target,
autotuning, and CUDA graphs for GPU graphs (`mode="reduce-overhead"`, cudagraphs.py).

Compiled artifacts are cached on disk in two levels (see artifact_cache.py): `aot` (torch-level
graph + inputs -> prim graphs + runtime plan; counted as cache_hits / cache_misses /
cache_bypasses) and `codegen` (prim graph -> generated code; codegen_cache_*). A warm start
skips tracing, partitioning, lowering, scheduling and code generation.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Callable

import torch

from ember.backends import artifact_cache
from ember.backends.aot_eager import (
    COLLECTIVES_NAMESPACE,
    SIZE_OPS,
    count_aten_fallbacks,
    counting_graph_runner,
)
from ember.backends.cudagraphs import CudaGraphRunner
from ember.backends.device_placement import move_scalar_work
from ember.backends.direct_prims import with_direct_prims
from ember.backends.eager_fallback import eager_on_limitation
from ember.backends.foreign_sizes import has_foreign_sizes
from ember.backends.frame_hook_off import without_frame_hook
from ember.backends.host_outputs import HostSplit, split_host_outputs
from ember.backends.inductor_settings import InductorSettings, inductor_settings
from ember.backends.registry import register_backend, register_backend_configuration
from ember.backends.size_specialization import SizeSpecializer, has_symbolic_sizes
from ember.exc import EmberError
from ember.stats import counters
from ember.trace import stage
from ember.trace.kernels import emit_fallbacks, emit_kernels
from ember_aot_autograd import INPUT_WRITES_META

log = logging.getLogger("ember.cache")
TARGETS = {"cpu": "cpp", "cuda": "triton"}  # device type -> ember-codegen target


DEFAULT_SETTINGS = InductorSettings()


def _devices(gm: torch.fx.GraphModule) -> set[str]:
    return {
        node.meta["val"].device.type
        for node in gm.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }


def codegen_target(gm: torch.fx.GraphModule, settings: InductorSettings = DEFAULT_SETTINGS) -> str:
    """The code generator for the devices the graph's tensors live on (or the forced one)."""
    devices = _devices(gm)
    if devices >= {"cpu", "cuda"}:
        offender = _cpu_work(gm)
        if offender is not None:
            raise MixedDeviceGraph(
                "the graph mixes CPU tensors (other than 0-dim scalars) with CUDA tensors; the "
                f"inductor backend generates code for one device per graph (first: {offender})"
            )
    return _target_of(devices, settings)


class MixedDeviceGraph(EmberError):
    """A prim graph with real work on two devices: run as an FX graph (counted)."""


def _cpu_work(gm: torch.fx.GraphModule) -> str | None:
    """The first CPU value with real work (not a 0-dim scalar) or CPU graph output, named
    with the user code it came from; None when the CPU side is only scalars."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() > 0:
            return _describe_node(node)
    (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    for o in torch.utils._pytree.tree_leaves(outputs):
        val = o.meta.get("val") if isinstance(o, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.device.type == "cpu":
            return "output " + _describe_node(o)
    return None


def _describe_node(node: torch.fx.Node) -> str:
    val = node.meta["val"]
    where = (node.meta.get("stack_trace") or "").strip().splitlines()
    origin = f" from {where[-2].strip()}" if len(where) >= 2 else ""
    return f"{node.name} = {node.target}: cpu {val.dtype}{list(val.shape)}{origin}"


def _target_of(devices: set[str], settings: InductorSettings = DEFAULT_SETTINGS) -> str:
    devices.discard("meta")
    if devices == {"cpu", "cuda"}:  # CPU scalars of a GPU graph: the wrapper moves them
        devices = {"cuda"}
    targets = {TARGETS.get(d) for d in devices} or {"cpp"}
    if None in targets or len(targets) > 1:
        raise EmberError(
            f"the inductor backend compiles graphs on one of {sorted(TARGETS)}, got tensors on "
            f"{sorted(devices)}; use backend='aot_eager' for other devices"
        )
    natural = targets.pop()
    if settings.target == "cpp" and natural != "cpp":
        raise EmberError(f"target 'cpp' compiles CPU graphs, this graph's tensors are on {devices}")
    # triton also runs CPU tensors, under TRITON_INTERPRET=1 (how CI tests the GPU path)
    return settings.target or natural


#: Graph kinds whose inputs' sizes and dtypes the backend's caller guards (the tracer's or
#: Dynamo's guards, see aot_module(inputs_guarded=True)): their C++ wrapper checks only the
#: inputs' strides. A backward graph's inputs are the gradients autograd passes, unguarded.
GUARDED_KINDS = frozenset({"forward"})


def _codegen_options(target: str, settings: InductorSettings, kind: str = "") -> dict:
    options = {"trusted_inputs": True} if kind in GUARDED_KINDS else {}
    if target == "triton" and settings.autotune:
        options["autotune"] = True
    return options


def _target_key(target: str, settings: InductorSettings, kind: str = "") -> str:
    """The codegen cache's target: the options change the generated code, so they are in it."""
    return "+".join([target, *sorted(_codegen_options(target, settings, kind))])


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


def _aten_ops(gm: torch.fx.GraphModule) -> dict[str, int]:
    """The aten ops a graph keeps, collectives included: what a codegen cache entry stores so
    that a hit counts them as a fresh compile does (_counted_runner tells the two apart)."""
    found: dict[str, int] = {}
    for node in gm.graph.nodes:
        target = node.target
        if (
            isinstance(target, torch._ops.OpOverload)
            and target.namespace != "ember_prims"
            and target not in SIZE_OPS
        ):
            found[str(target)] = found.get(str(target), 0) + 1
    return found


def _is_collective(op: str) -> bool:
    return op.startswith(f"{COLLECTIVES_NAMESPACE}.")


def _counted_runner(kind: str, compiled: Callable, fallbacks: dict, aten: dict) -> Callable:
    stats = counters["inductor"]
    stats[f"{kind}_graphs"] += 1
    stats["kernels"] += getattr(compiled, "kernel_count", 0)
    for prim, count in fallbacks.items():
        counters["inductor_fallbacks"][str(prim)] += count
    for op, count in aten.items():
        counters["collectives" if _is_collective(op) else "aten_fallbacks"][op] += count
    emit_fallbacks(fallbacks, {op: n for op, n in aten.items() if not _is_collective(op)})

    runs = f"{kind}_runs"

    def run(*args):
        stats[runs] += 1
        return compiled(args)  # a compiled graph takes any sequence: no copy to a list

    return without_frame_hook(run) if kind == "backward" else run


def _writes_key(writes: tuple) -> str:
    """The codegen cache's word for the outputs a graph may write into its inputs: one prim
    graph compiles differently for a caller that copies an output into an input (the code
    writes it there) and one that returns it as a new tensor."""
    if not writes:
        return ""
    return "+writes:" + hashlib.sha256(repr(writes).encode()).hexdigest()[:16]


def _codegen_key(gm: torch.fx.GraphModule, target: str) -> str | None:  # target: _target_key
    from ember.backends.codegen_artifact import NotCacheable, graph_key, symbolic_graph_key
    from ember.backends.symbolic_key import shape_env_of
    from ember_aot_autograd import NotSerializable, graph_to_source

    if not artifact_cache.enabled():
        return None
    try:
        env = shape_env_of(gm) if has_symbolic_sizes(gm) else None
        if env is not None:  # keyed by its symbolic form: one entry for every size
            return symbolic_graph_key(gm, env, target)
        return graph_key(graph_to_source(gm), target)
    except (NotSerializable, NotCacheable) as reason:
        log.info("codegen artifact cache bypassed: %s", reason)
        artifact_cache.count("bypasses", "codegen_")
        return None


def compile_prim_graph(kind: str, settings: InductorSettings = DEFAULT_SETTINGS) -> Callable:
    """An aot compiler: prim-level graph -> loop IR -> scheduled kernels -> compiled code,
    or the compiled code straight from the codegen artifact cache. A graph with symbolic
    sizes that the loop IR cannot compile symbolically gets one static compile per concrete
    size signature (size_specialization.py)."""
    compile_static = _compile_prim_graph(kind, settings)

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        from ember_inductor_ir import DynamicShapeUnsupported

        if not has_symbolic_sizes(gm):
            return compile_static(gm, example_inputs)
        try:
            return compile_static(gm, example_inputs)
        except DynamicShapeUnsupported as reason:
            limit = settings.dynamic_specializations
            return SizeSpecializer(gm, kind, compile_static, limit, str(reason))

    return compile_graph


def _compile_prim_graph(kind: str, settings: InductorSettings) -> Callable:
    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        from ember.backends.codegen_artifact import CodegenArtifacts, NotCacheable
        from ember.backends.symbolic_key import condition_guards, shape_env_of
        from ember_codegen import compile_graph as codegen
        from ember_inductor_ir import lower, schedule

        kept = ""
        if {"cpu", "cuda"} <= _devices(gm):
            # (a graph with symbolic sizes may still be specialized per size: left whole)
            split = "symbolic sizes" if has_symbolic_sizes(gm) else split_host_outputs(gm)
            if isinstance(split, HostSplit):  # CPU outputs computed by a host graph
                counters["inductor"]["host_output_splits"] += 1
                split.carry_input_writes(gm.meta.get(INPUT_WRITES_META, ()))
                move_scalar_work(split.device, scalars_too=True)
                host = compile_graph(split.host, [example_inputs[i] for i in split.host_inputs])
                inputs = [example_inputs[i] for i in split.device_inputs]
                return split.runner(host, compile_graph(split.device, inputs))
            # CPU values made only from CPU scalars: computed on the GPU instead
            _, kept = move_scalar_work(gm)
        try:
            target = codegen_target(gm, settings)
        except MixedDeviceGraph as reason:  # correct but not generated: counted and logged
            log.warning("%s graph runs as an FX graph: %s (%s)", kind, reason, kept)
            counters["inductor_fallbacks"]["mixed_device_graph"] += 1
            # each prim called directly, not through its checked kernel (direct_prims.py)
            return counting_graph_runner("inductor", kind)(with_direct_prims(gm), example_inputs)
        writes = tuple(gm.meta.get(INPUT_WRITES_META, ()))  # outputs it may write in place
        key = _codegen_key(gm, _target_key(target, settings, kind) + _writes_key(writes))
        env = shape_env_of(gm) if key is not None else None
        if key is not None:
            hit = CodegenArtifacts().load(key, env)
            if hit is not None:
                artifact_cache.count("hits", "codegen_")
                compiled, aten = hit
                emit_kernels(gm, None, compiled, target)
                compiled = _finish(compiled, target, settings, kind, writes)
                return _counted_runner(kind, compiled, compiled.fallback_counts, aten)
        count_aten_fallbacks(gm)
        with stage("lower"):
            lowering = lower(gm, example_inputs, target=target, input_writes=writes)
        with stage("schedule"):
            scheduled = schedule(lowering)
        in_place = sum(a.in_place for a in scheduled.allocations.values())
        if in_place:  # outputs written into the inputs they go back to (reuse.py)
            counters["inductor"]["outputs_written_in_place"] += in_place
        options = _codegen_options(target, settings, kind)
        with stage("codegen"):
            compiled = codegen(scheduled, target=target, **options)
        emit_kernels(gm, scheduled, compiled, target)
        if key is not None:
            try:
                CodegenArtifacts().save(key, compiled, _aten_ops(gm), condition_guards(env))
                artifact_cache.count("misses", "codegen_")
            except NotCacheable as reason:
                log.info("codegen artifact cache bypassed: %s", reason)
                artifact_cache.count("bypasses", "codegen_")
        compiled = _finish(compiled, target, settings, kind, writes)
        return _counted_runner(kind, compiled, scheduled.fallback_counts, {})

    return compile_graph


def compile_graph_source(
    kind: str,
    source,
    settings: InductorSettings = DEFAULT_SETTINGS,
    input_writes: tuple = (),
) -> Callable:
    """A prim graph from the aot artifact cache -> compiled code (codegen cache first; on a
    miss the graph is rebuilt from its source and compiled as usual). ``input_writes``: its
    INPUT_WRITES_META, which the source does not carry (the aot plan tells it)."""
    from ember.backends.codegen_artifact import CodegenArtifacts, graph_key
    from ember_aot_autograd import graph_from_source

    target = _target_of({layout[3].split(":")[0] for layout in source.inputs}, settings)
    target_key = _target_key(target, settings, kind) + _writes_key(input_writes)
    hit = CodegenArtifacts().load(graph_key(source, target_key))
    if hit is not None:
        artifact_cache.count("hits", "codegen_")
        compiled, aten = hit
        emit_kernels(None, None, compiled, target)
        compiled = _finish(compiled, target, settings, kind, tuple(input_writes))
        return _counted_runner(kind, compiled, compiled.fallback_counts, aten)
    gm = graph_from_source(source)
    gm.meta[INPUT_WRITES_META] = tuple(input_writes)
    example_inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    return compile_prim_graph(kind, settings)(gm, example_inputs)


def saved_layouts_partition(partition_fn: Callable, settings: InductorSettings) -> Callable:
    """`partition_fn`, then saved activations kept in the layout the forward computes them
    in (channels-last, where the target's policy trains that way; ember_inductor_ir's
    saved_layouts.py); the backward is compiled for those strides. Its name carries what
    the decision reads besides the graphs, since the aot artifact cache keys by it."""
    from ember_inductor_ir.channels_last import ENV
    from ember_inductor_ir.saved_layouts import keep_saved_channels_last

    def partition(joint):
        part = partition_fn(joint)
        try:
            target = codegen_target(part.fw_gm, settings)
        except EmberError:  # mixed devices and the like: compiled (or not) as they are
            return part
        keep_saved_channels_last(
            part.fw_gm, part.bw_gm, part.num_fw_outputs, part.num_saved, target
        )
        return part

    partition.__module__ = __name__
    partition.__qualname__ = (
        f"saved_layouts({partition_fn.__module__}.{partition_fn.__qualname__}, "
        f"target={settings.target or 'device'}, {ENV}={os.environ.get(ENV, 'auto')})"
    )
    return partition


@register_backend_configuration("inductor")
def configure_inductor(mode: str | None, options: dict | None) -> Callable:
    """The inductor backend with `ember.compile`'s mode and options applied."""
    settings = inductor_settings(mode, options)
    return functools.partial(inductor, settings=settings)


@register_backend("inductor")
def inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[torch.Tensor],
    settings: InductorSettings | None = None,
) -> Callable:
    compile_fn = eager_on_limitation("inductor", functools.partial(_inductor, settings=settings))
    if has_foreign_sizes(example_inputs):  # Dynamo's dynamic sizes: one compile per size
        limit = (settings or DEFAULT_SETTINGS).dynamic_specializations
        return SizeSpecializer(gm, "dynamo", compile_fn, limit, "sizes of another shape env")
    return compile_fn(gm, example_inputs)


def _inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[torch.Tensor],
    settings: InductorSettings | None = None,
) -> Callable:
    from ember.backends.aot_artifact import AotArtifacts
    from ember.backends.attention_kernels import explicit_cuda_attention
    from ember_aot_autograd import aot_module, min_cut_rematerialization_partition
    from ember_primops import decomposition_table

    explicit_cuda_attention(gm)
    settings = settings or inductor_settings()  # EMBER_INDUCTOR_TARGET applies to the default
    decompositions = decomposition_table()
    partition_fn = saved_layouts_partition(min_cut_rematerialization_partition, settings)
    store = None
    if artifact_cache.enabled():
        store = AotArtifacts(
            gm,
            decompositions,
            partition_fn,
            functools.partial(compile_graph_source, settings=settings),
        )
    with stage("aot"):  # and decompose (ember_aot_autograd times it)
        return aot_module(
            gm,
            example_inputs,
            fw_compiler=compile_prim_graph("forward", settings),
            bw_compiler=compile_prim_graph("backward", settings),
            decompositions=decompositions,
            partition_fn=partition_fn,
            artifact_store=store,
            # the caller (our tracer, or Dynamo: the backend convention) guards the inputs' kinds
            inputs_guarded=True,
        )
