"""Level 1 of the artifact cache: a prim-level graph -> its generated C++ (or Triton) and wrapper.

Key: the graph's source, each placeholder's layout, the codegen target and the code
fingerprint. A graph with symbolic sizes is keyed by its symbolic form, never by the example
sizes (symbolic_key.py): one entry serves every size its guards admit, in any process. Entry: the C++ source (its kernel library comes from ember-codegen's kernel
cache, rebuilt there if it went missing), the wrapper source, the kernels' signatures, and the
wrapper's namespace written as plain data (dtypes, ops and importable functions by name,
constant tensors as bytes, and their data pointers as "the pointer of that constant", taken
again after loading). A wrapper holding anything else (closures, other objects) is not cached.
Triton graphs are written by ember_codegen.triton.artifact with this module's constant encoding.
"""

from __future__ import annotations

import importlib
import logging
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ember.backends.artifact_cache import ArtifactDir, code_fingerprint

log = logging.getLogger("ember.cache")
LEVEL = "codegen"
_BUILT_IN = {"__builtins__", "call", "_error", "_raise_kernel_error"}


class NotCacheable(Exception):
    """A compiled graph whose wrapper cannot be written as plain data."""


def graph_key(source: Any, target: str) -> str:
    from ember_codegen.cache import content_key

    return content_key(["ember-artifact-codegen", code_fingerprint(), target, source.identity()])


def symbolic_graph_key(gm: torch.fx.GraphModule, env: Any, target: str) -> str:
    """The key of a graph with symbolic sizes (raises NotCacheable): see symbolic_key.py."""
    from ember.backends.symbolic_key import SymbolicUncacheable, symbolic_identity
    from ember_codegen.cache import content_key

    try:
        identity = symbolic_identity(gm, env)
    except SymbolicUncacheable as reason:
        raise NotCacheable(str(reason)) from reason
    return content_key(["ember-artifact-codegen-symbolic", code_fingerprint(), target, identity])


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
    if isinstance(value, torch.Tensor):
        from ember_aot_autograd import NotSerializable, encode_tensor

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
    if kind == "op":
        return getattr(getattr(getattr(torch.ops, data[1]), data[2]), data[3])
    if kind == "function":
        return _resolve(data[1], data[2])
    if kind == "tensor":
        from ember_aot_autograd import decode_tensor

        return decode_tensor(data[1])
    raise ValueError(f"unknown wrapper constant kind {kind!r}")


def to_payload(compiled: Any, aten_fallbacks: dict[str, int]) -> dict:
    """Plain data for a CompiledGraph (raises NotCacheable)."""
    from ember_codegen.cpp.emit.wrapper import runtime_namespace

    if hasattr(compiled, "triton_source"):
        return _triton_payload(compiled, aten_fallbacks)
    if not hasattr(compiled, "cpp_source"):
        raise NotCacheable(f"{type(compiled).__name__} is not a C++ or Triton compiled graph")
    if not isinstance(compiled._call, types.FunctionType):  # a wrapper written per binding
        raise NotCacheable(f"the wrapper is a {type(compiled._call).__name__}, not one source")
    runtime = set(runtime_namespace())
    globals_ = compiled._call.__globals__
    namespace = {}
    for name, value in globals_.items():
        if name in _BUILT_IN or name in runtime or name.startswith(("_k_", "_run_")):
            continue
        pointee = name.removeprefix("p_")
        if pointee != name and isinstance(globals_.get(pointee), torch.Tensor):
            if value != globals_[pointee].data_ptr():
                raise NotCacheable(f"wrapper pointer {name} is not its tensor's data pointer")
            namespace[name] = ["data_ptr", pointee]  # taken again from the loaded constant
            continue
        namespace[name] = _encode(value)
    kernels = [
        {
            "name": k.name,
            "code": k.code,
            "params": [
                [p.buffer, str(p.dtype).removeprefix("torch."), p.written] for p in k.params
            ],
            "may_fail": k.may_fail,
            "register_only": sorted(k.register_only),
            "mode": k.mode,
            "size_params": list(k.size_params),
        }
        for k in compiled.kernels
    ]
    return {
        "cpp_source": compiled.cpp_source,
        "wrapper_source": compiled.wrapper_source,
        "kernels": kernels,
        "runs": [run.to_data() for run in getattr(compiled, "runs", ())],
        "namespace": namespace,
        "fallback_counts": {str(k): v for k, v in compiled.fallback_counts.items()},
        "aten_fallbacks": dict(aten_fallbacks),
    }


def _triton_payload(compiled: Any, aten_fallbacks: dict[str, int]) -> dict:
    from ember_codegen.triton.artifact import NotRestorable
    from ember_codegen.triton.artifact import to_payload as triton_to_payload

    try:
        payload = triton_to_payload(compiled, _encode)
    except NotRestorable as reason:
        raise NotCacheable(str(reason)) from reason
    return {**payload, "aten_fallbacks": dict(aten_fallbacks)}


def _from_triton_payload(payload: dict, origin: str) -> Any | None:
    """The Triton graph, or None where it cannot be rebuilt here (then compiled afresh)."""
    from ember_codegen.triton.artifact import NotRestorable
    from ember_codegen.triton.artifact import from_payload as triton_from_payload

    try:
        return triton_from_payload(payload, _decode, origin)
    except NotRestorable:
        return None


def _raiser(library: Any) -> Callable[[str], None]:
    from ember_codegen import KernelRuntimeError
    from ember_codegen.cpp.emit.compiled import KERNEL_ERRORS

    def raise_kernel_error(kernel_name: str) -> None:
        code = library.take_error() if library is not None else 0
        raise KernelRuntimeError(
            f"kernel {kernel_name}: {KERNEL_ERRORS.get(code, f'unknown error code {code}')}"
        )

    return raise_kernel_error


def from_payload(payload: dict, origin: str) -> Any:
    """The CompiledGraph `to_payload` described, its kernels loaded from the kernel cache."""
    from ember_codegen import compile_source
    from ember_codegen.cpp.emit.compiled import CompiledGraph, native_functions
    from ember_codegen.cpp.emit.kernel import KernelParam, KernelSource
    from ember_codegen.cpp.emit.launch_runs import LaunchRun
    from ember_codegen.cpp.emit.wrapper import runtime_namespace

    kernels = [
        KernelSource(
            k["name"],
            k["code"],
            [KernelParam(b, getattr(torch, d), w) for b, d, w in k["params"]],
            k["may_fail"],
            set(k["register_only"]),
            k["mode"],
            list(k.get("size_params", ())),
        )
        for k in payload["kernels"]
    ]
    namespace = {**runtime_namespace()}
    encoded = payload["namespace"]
    namespace.update({name: _decode(v) for name, v in encoded.items() if v[0] != "data_ptr"})
    for name, value in encoded.items():
        if value[0] == "data_ptr":
            namespace[name] = namespace[value[1]].data_ptr()
    by_name = {k.name: k for k in kernels}
    runs = [LaunchRun.from_data(run, by_name) for run in payload.get("runs", ())]
    library = None
    if kernels:
        library = compile_source(payload["cpp_source"])
        namespace.update(native_functions(library, kernels, runs))
    namespace["_raise_kernel_error"] = _raiser(library)
    exec(compile(payload["wrapper_source"], origin, "exec"), namespace)
    return CompiledGraph(
        namespace["call"],
        payload["cpp_source"],
        payload["wrapper_source"],
        kernels,
        library,
        payload["fallback_counts"],
        runs,
    )


class CodegenArtifacts:
    """Level-1 entries: load/save a compiled graph by its graph key. A symbolic graph's
    entry also holds the condition guards it was compiled under (`guards`): a hit needs
    them to hold on `env`'s sizes, and records them there (symbolic_key.py)."""

    def __init__(self) -> None:
        self.store = ArtifactDir(LEVEL)

    def load(self, key: str, env: Any = None) -> tuple[Any, dict] | None:
        from ember.backends.symbolic_key import replay_guards

        payload = self.store.load(key)
        if payload is None:
            return None
        if not replay_guards(env, payload.get("guards", ())):
            log.info("codegen artifact %s: its guards fail on these sizes", key)
            return None
        origin = str(self.store.path(key))
        if payload.get("target") == "triton":
            compiled = _from_triton_payload(payload, origin)
            return None if compiled is None else (compiled, payload["aten_fallbacks"])
        return from_payload(payload, origin), payload["aten_fallbacks"]

    def save(
        self,
        key: str,
        compiled: Any,
        aten_fallbacks: dict[str, int],
        guards: Sequence[str] = (),
    ) -> None:
        payload = to_payload(compiled, aten_fallbacks)
        if guards:
            payload["guards"] = list(guards)
        self.store.save(key, payload)
