"""The codegen level of the artifact cache as the inductor stages use it (codegen_artifact.py
stores the entries): a prim graph's key (its code, or its symbolic form; the target and the
options that change the generated code; the outputs it may write into its inputs), the
lookup and the store, each counted under `counters["inductor"]["codegen_cache_*"]`."""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any

import torch

import ember.backends.artifact_cache as artifact_cache
from ember.backends.aot_eager import SIZE_OPS
from ember.backends.codegen_artifact import (
    CodegenArtifacts,
    NotCacheable,
    graph_key,
    symbolic_graph_key,
)
from ember.backends.inductor_settings import InductorSettings
from ember.backends.size_specialization import has_symbolic_sizes
from ember.backends.symbolic_key import condition_guards, shape_env_of
from ember_aot_autograd import GraphSource, NotSerializable, graph_to_source

log = logging.getLogger("ember.cache")

#: Graph kinds whose inputs' sizes and dtypes the backend's caller guards (the tracer's or
#: Dynamo's guards, see aot_module(inputs_guarded=True)): their C++ wrapper checks only the
#: inputs' strides. A backward graph's inputs are the gradients autograd passes, unguarded.
GUARDED_KINDS = frozenset({"forward"})


def codegen_options(target: str, settings: InductorSettings, kind: str = "") -> dict:
    options = {"trusted_inputs": True} if kind in GUARDED_KINDS else {}
    if target == "triton" and settings.autotune:
        options["autotune"] = True
    return options


def releases_inputs(kind: str, settings: InductorSettings) -> bool:
    """Whether a graph of this kind, compiled for aot's call, is handed its inputs (aot's
    `owns_arguments` convention): a backward's saved activations then die at their last
    use instead of at the backward's end. Not under CUDA graphs, whose replays read their
    static inputs again."""
    return kind == "backward" and not settings.cudagraphs


def target_key(
    target: str, settings: InductorSettings, kind: str, writes: tuple, released: bool = False
) -> str:
    """The cache's word for the target: the options change the generated code, so they are
    in it; so are the outputs a graph may write into its inputs: one prim graph compiles
    differently for a caller that copies an output into an input (the code writes it there)
    and one that returns it as a new tensor; and whether it releases its inputs (its
    wrapper empties the list it is called with)."""
    words = "+".join([target, *sorted(codegen_options(target, settings, kind))])
    if released:
        words += "+released"
    if target == "triton" and os.environ.get("EMBER_TRITON_COMBINE", "1") == "0":
        words += "+uncombined"  # every kernel its own launch (ember_codegen triton/combo.py)
    if not writes:
        return words
    return words + "+writes:" + hashlib.sha256(repr(writes).encode()).hexdigest()[:16]


def codegen_key(gm: torch.fx.GraphModule, target: str) -> str | None:  # target: target_key
    """The graph's key, or None where the cache is off or cannot key it (counted)."""
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


def lookup(key: str, env: Any = None) -> tuple[Any, dict, dict] | None:
    """(compiled code, the aten ops its graph keeps, its report notes) stored under `key`,
    or None."""
    hit = CodegenArtifacts().load(key, env)
    if hit is not None:
        artifact_cache.count("hits", "codegen_")
    return hit


def lookup_source(source: GraphSource, target: str) -> tuple[Any, dict, dict] | None:
    """As lookup, for a graph the aot artifact cache stored as source."""
    return lookup(graph_key(source, target))


def store(
    key: str, compiled: Any, gm: torch.fx.GraphModule, env: Any, notes: dict | None = None
) -> None:
    try:
        CodegenArtifacts().save(key, compiled, aten_ops(gm), condition_guards(env), notes)
        artifact_cache.count("misses", "codegen_")
    except NotCacheable as reason:
        log.info("codegen artifact cache bypassed: %s", reason)
        artifact_cache.count("bypasses", "codegen_")


def aten_ops(gm: torch.fx.GraphModule) -> dict[str, int]:
    """The aten ops a graph keeps, collectives included: what a cache entry stores so that a
    hit counts them as a fresh compile does (prim_stages.finished_runner tells them apart)."""
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
