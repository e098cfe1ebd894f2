"""Level 2 of the artifact cache: a torch-level graph + its inputs -> the partitioned prim
graphs (as source) and the runtime wrapper's plan, so a hit skips tracing and partitioning.

The key holds everything the trace depends on: the graph's code and the globals it names,
each input's shape, stride, offset, dtype, device, requires_grad and aliasing, the module
state's names, grad mode, the default dtype, the decomposition table, the partitioner and
the code fingerprint (torch's version, every stage's sources). A graph whose behaviour is not
all in that key (attributes read through get_attr, submodules, user functions, non-plain
inputs, tensor subclasses) is not cached: it is counted as a bypass, never a stale hit.
"""

from __future__ import annotations

import hashlib
import logging
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

import ember.backends.artifact_cache as artifact_cache
from ember.backends.artifact_cache import ArtifactDir, code_fingerprint
from ember_aot_autograd import (
    GraphSource,
    NotSerializable,
    graph_to_source,
    input_writes,
    plan_from_data,
    plan_runner,
    plan_to_data,
)
from ember_aot_autograd.module_state import module_state
from ember_aot_autograd.passes import partitioner_name
from ember_codegen.cache import content_key

log = logging.getLogger("ember.cache")

LEVEL = "aot"
#: modules whose functions a cached torch-level graph may call (named, versioned by the key)
TRUSTED_MODULES = ("torch", "operator", "_operator", "math", "builtins", "numpy")
_PLAIN = (type(None), bool, int, float, str)
_decomposition_ids: dict[int, tuple[int, str]] = {}


class Uncacheable(Exception):
    """Something the trace depends on that the key cannot capture."""


def _trusted(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in TRUSTED_MODULES


def _describe_global(name: str, value: Any) -> str:
    if isinstance(value, types.ModuleType):
        if _trusted(value.__name__):
            return f"{name}=module:{value.__name__}"
    elif isinstance(value, (*_PLAIN, torch.dtype, torch.device)):
        return f"{name}={type(value).__name__}:{value!r}"
    elif callable(value) and _trusted(getattr(value, "__module__", None)):
        return f"{name}=callable:{value.__module__}.{getattr(value, '__qualname__', value)!r}"
    raise Uncacheable(f"the graph names global {name}={value!r}")


def _describe_input(position: int, value: Any, storages: dict[int, int]) -> str:
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise Uncacheable(f"input {position} is a {type(value).__name__}")
        if value.layout != torch.strided or value.is_quantized:
            raise Uncacheable(f"input {position} has layout {value.layout}")
        storage = value.untyped_storage().data_ptr()
        alias = storages.setdefault(storage, position)  # first input sharing the storage
        return repr(
            (
                tuple(value.shape),
                value.stride(),
                value.storage_offset(),
                value.dtype,
                str(value.device),
                value.requires_grad,
                alias,
            )
        )
    if isinstance(value, _PLAIN):
        return f"{type(value).__name__}:{value!r}"
    raise Uncacheable(f"input {position} is a {type(value).__name__}")


def _decomposition_identity(table: dict | None) -> str:
    """Which ops the table decomposes and by which functions (memoized per table object)."""
    if table is None:
        return "none"
    memo = _decomposition_ids.get(id(table))
    if memo is not None and memo[0] == len(table):
        return memo[1]
    parts = sorted(
        f"{op}->{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        for op, fn in table.items()
    )
    identity = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    _decomposition_ids[id(table)] = (len(table), identity)
    return identity


def aot_key(
    gm: torch.fx.GraphModule,
    state_names: Sequence[tuple[str, ...]],
    args: Sequence[Any],
    settings: str,
) -> str:
    """The level-2 key of one variant (raises Uncacheable)."""
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            raise Uncacheable(f"the graph reads attribute {node.target!r} ({node.op})")
    code = gm.graph.python_code(root_module="self")
    global_names = [_describe_global(n, v) for n, v in sorted(code.globals.items())]
    storages: dict[int, int] = {}
    inputs = [_describe_input(i, v, storages) for i, v in enumerate(args)]
    return content_key(
        [
            "ember-artifact-aot",
            code_fingerprint(),
            settings,
            f"grad={torch.is_grad_enabled()} default_dtype={torch.get_default_dtype()}",
            code.src,
            "\n".join(global_names),
            repr(list(state_names)),
            "\n".join(inputs),
        ]
    )


class AotArtifacts:
    """The ArtifactStore ember_aot_autograd.aot_module consults for one torch-level graph."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        decompositions: dict | None,
        partition_fn: Callable,
        compile_source: Callable[..., Callable],  # (kind, GraphSource, input_writes=)
    ) -> None:
        self.gm = gm
        self.state_names = [names for names, _ in module_state(gm)]
        self.settings = (
            f"decompositions={_decomposition_identity(decompositions)} "
            f"partition={partitioner_name(partition_fn)}"
        )
        self.compile_source = compile_source  # (kind, GraphSource) -> compiled graph
        self.store = ArtifactDir(LEVEL)

    def _key(self, args: Sequence[Any]) -> str | None:
        try:
            return aot_key(self.gm, self.state_names, args, self.settings)
        except Uncacheable as reason:
            log.info("artifact cache bypassed: %s", reason)
            return None

    def load(self, args: Sequence[Any]) -> Callable | None:
        key = self._key(args)
        if key is None:
            artifact_cache.count("bypasses")
            return None
        payload = self.store.load(key)
        if payload is None:
            return None
        try:
            plan = plan_from_data(payload["plan"])
            writes = (
                input_writes(plan.tensor_inputs, plan.mutated_inputs)
                if plan.kind == "inference"
                else ()
            )
            forward = self.compile_source(
                "forward", GraphSource.from_data(payload["forward"]), input_writes=writes
            )
            backward = None
            if payload["backward"] is not None:
                backward = self.compile_source(
                    "backward", GraphSource.from_data(payload["backward"])
                )
        except (KeyError, ValueError, TypeError, AttributeError) as error:
            log.warning("artifact cache entry %s unusable (%s); recompiling", key, error)
            return None
        artifact_cache.count("hits")
        log.info("artifact cache hit %s", key)
        return plan_runner(plan, forward, backward)

    def save(self, args: Sequence[Any], plan: Any, forward: Any, backward: Any) -> None:
        key = self._key(args)
        if key is None:  # counted as a bypass by load
            return
        try:
            payload = {
                "plan": plan_to_data(plan),
                "forward": graph_to_source(forward).to_data(),
                "backward": graph_to_source(backward).to_data() if backward is not None else None,
            }
        except NotSerializable as reason:
            log.info("artifact cache bypassed: %s", reason)
            artifact_cache.count("bypasses")
            return
        self.store.save(key, payload)
        artifact_cache.count("misses")
