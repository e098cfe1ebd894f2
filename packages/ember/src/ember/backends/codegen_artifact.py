"""Level 1 of the artifact cache: a prim-level graph -> its generated C++ (or Triton) and wrapper.

Key: the graph's source, each placeholder's layout, the codegen target and the code
fingerprint. A graph with symbolic sizes is keyed by its symbolic form, never by the example
sizes (symbolic_key.py): one entry serves every size its guards admit, in any process. Entry: the C++ source (its kernel library comes from ember-codegen's kernel
cache, rebuilt there if it went missing), the wrapper source, the kernels' signatures, and the
wrapper's namespace written as plain data. ember_codegen.artifact writes and rebuilds the
compiled graph of either target; this module gives it the encoding of the wrapper's constants
(dtypes, ops and importable functions by name, constant tensors as bytes). A wrapper holding
anything else (closures, other objects) is not cached; an entry that cannot be rebuilt here
(ember_codegen's NotRestorable: a CUDA graph without a GPU, an unknown format) is a miss.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import Any

import torch

from ember.backends.artifact_cache import ArtifactDir, code_fingerprint
from ember.backends.symbolic_key import SymbolicUncacheable, replay_guards, symbolic_identity
from ember_aot_autograd import NotSerializable, decode_tensor, encode_tensor
from ember_codegen.artifact import NotRestorable, artifact_key
from ember_codegen.artifact import from_payload as codegen_from_payload
from ember_codegen.artifact import to_payload as codegen_to_payload

log = logging.getLogger("ember.cache")
LEVEL = "codegen"


class NotCacheable(Exception):
    """A compiled graph whose wrapper cannot be written as plain data."""


def graph_key(source: Any, target: str) -> str:
    return artifact_key(["ember-artifact-codegen", code_fingerprint(), target, source.identity()])


def symbolic_graph_key(gm: torch.fx.GraphModule, env: Any, target: str) -> str:
    """The key of a graph with symbolic sizes (raises NotCacheable): see symbolic_key.py."""
    try:
        identity = symbolic_identity(gm, env)
    except SymbolicUncacheable as reason:
        raise NotCacheable(str(reason)) from reason
    return artifact_key(["ember-artifact-codegen-symbolic", code_fingerprint(), target, identity])


def _resolve(module: str, qualname: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _encode(value: Any) -> list:
    if value is None or isinstance(value, (bool, int, str)):
        return ["value", value]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, torch.dtype):
        return ["dtype", str(value).removeprefix("torch.")]
    if isinstance(value, torch.device):  # a fallback's device= (ghostnet's training step)
        return ["device", str(value)]
    if isinstance(value, torch.Tensor):
        try:
            return ["tensor", encode_tensor(value, "wrapper constant")]
        except NotSerializable as reason:
            raise NotCacheable(str(reason)) from reason
    if isinstance(value, torch._ops.OpOverload):
        return ["op", value.namespace, value._opname, value._overloadname]
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if callable(value) and module and qualname and "<" not in qualname:
        try:
            if _resolve(module, qualname) is value:
                return ["function", module, qualname]
        except (ImportError, AttributeError):
            pass
    raise NotCacheable(f"wrapper constant {type(value).__name__} {value!r}")


def _decode(data: list) -> Any:
    kind = data[0]
    if kind == "value":
        return data[1]
    if kind == "float":
        return float(data[1])  # repr of a float, inf and nan included
    if kind == "dtype":
        return getattr(torch, data[1])
    if kind == "device":
        return torch.device(data[1])
    if kind == "op":
        return getattr(getattr(getattr(torch.ops, data[1]), data[2]), data[3])
    if kind == "function":
        return _resolve(data[1], data[2])
    if kind == "tensor":
        return decode_tensor(data[1])
    raise ValueError(f"unknown wrapper constant kind {kind!r}")


def to_payload(compiled: Any, aten_fallbacks: dict[str, int]) -> dict:
    """Plain data for a compiled graph of either target (raises NotCacheable)."""
    try:
        payload = codegen_to_payload(compiled, _encode)
    except NotRestorable as reason:
        raise NotCacheable(str(reason)) from reason
    return {**payload, "aten_fallbacks": dict(aten_fallbacks)}


def from_payload(payload: dict, origin: str) -> Any | None:
    """The compiled graph `to_payload` described, its kernels loaded from the kernel caches,
    or None where it cannot be rebuilt here (then compiled afresh)."""
    try:
        return codegen_from_payload(payload, _decode, origin)
    except NotRestorable as reason:
        log.info("codegen artifact %s not restored: %s", origin, reason)
        return None


class CodegenArtifacts:
    """Level-1 entries: load/save a compiled graph by its graph key. A symbolic graph's
    entry also holds the condition guards it was compiled under (`guards`): a hit needs
    them to hold on `env`'s sizes, and records them there (symbolic_key.py)."""

    def __init__(self) -> None:
        self.store = ArtifactDir(LEVEL)

    def load(self, key: str, env: Any = None) -> tuple[Any, dict, dict] | None:
        """(compiled graph, its aten fallbacks, its notes for the compile report) or None."""
        payload = self.store.load(key)
        if payload is None:
            return None
        if not replay_guards(env, payload.get("guards", ())):
            log.info("codegen artifact %s: its guards fail on these sizes", key)
            return None
        compiled = from_payload(payload, str(self.store.path(key)))
        if compiled is None:
            return None
        return compiled, payload["aten_fallbacks"], dict(payload.get("report") or {})

    def save(
        self,
        key: str,
        compiled: Any,
        aten_fallbacks: dict[str, int],
        guards: Sequence[str] = (),
        notes: dict | None = None,
    ) -> None:
        """`notes`: text for the compile report (each kernel's fused nodes, the kernel
        groups, the loop IR and fusion decisions where recorded), shown again on a hit."""
        payload = to_payload(compiled, aten_fallbacks)
        if guards:
            payload["guards"] = list(guards)
        if notes:
            payload["report"] = dict(notes)
        self.store.save(key, payload)
