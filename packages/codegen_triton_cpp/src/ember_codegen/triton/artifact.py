"""A compiled Triton graph as plain data, and back (the Triton half of ``ember_codegen.artifact``,
which the umbrella's codegen artifact cache writes).

What is kept: the kernel module's source (reloaded from the content-hashed module cache, its
binaries from Triton's cache under EMBER_CACHE_DIR), the wrapper's source, each kernel's launch
data (parameters, grid, launch configuration, workspaces) and its parameters' layouts, and the
wrapper's own constants, encoded by the caller's `encode` (dtypes, aten ops, tensors...).
Loading execs the wrapper again and, on a GPU, warms every binary up from the caches to give
it its direct launch; a wrapper that launches a binary directly whose launcher cannot be
reached now is refused (`NotRestorable`), so the caller compiles afresh.
Graphs with a matmul template are not written (the choice is cached on its own), nor those
whose wrapper is written per binding of the size symbols; a graph with symbolic sizes keeps
each kernel's size arguments and point count (an expression) and the example sizes its
binaries are warmed up on.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import sympy
import torch

from ember_codegen.exc import NotRestorable
from ember_inductor_ir import indexing

from .cache import configure_triton_cache, interpreting, load_module
from .compiled import CompiledGraph, compile_parallel
from .heuristics import LaunchConfig
from .kernel import GroupKernels, TritonKernel, Workspace
from .launch import current_stream_getter
from .wrapper import runtime_namespace

#: wrapper globals rebuilt on load rather than stored
_REBUILT_PREFIXES = ("_k_", "_run_", "_launch_", "_fn_", "_meta_")
_REBUILT = {"__builtins__", "call", "_current_stream"}


def to_payload(compiled: CompiledGraph, encode: Callable[[Any], list]) -> dict:
    if compiled.templates:
        raise NotRestorable("a graph with a matmul template")
    if not isinstance(compiled._call, types.FunctionType):  # a wrapper written per binding
        raise NotRestorable(f"the wrapper is a {type(compiled._call).__name__}, not one source")
    runtime = set(runtime_namespace(compiled.device))
    namespace = {
        name: encode(value)
        for name, value in compiled._call.__globals__.items()
        if name not in _REBUILT and name not in runtime and not name.startswith(_REBUILT_PREFIXES)
    }
    groups = [
        {
            "name": g.name,
            "register_only": sorted(g.register_only),
            "workspaces": [
                [w.name, w.numel, str(w.dtype).removeprefix("torch.")] for w in g.workspaces
            ],
            "kernels": [
                {
                    "name": k.name,
                    "code": k.code,
                    "params": list(k.params),
                    "kind": k.kind,
                    "xnumel": _size_text(k.xnumel),
                    "reduction": k.reduction,
                    "config": asdict(k.config),
                    "size_params": list(k.size_params),
                    "rnumel": k.rnumel,
                }
                for k in g.kernels
            ],
        }
        for g in compiled.groups
    ]
    return {
        "target": compiled.target,
        "triton_source": compiled.triton_source,
        "wrapper_source": compiled.wrapper_source,
        "device": str(compiled.device),
        "groups": groups,
        "launch_layouts": compiled.launch_layouts,
        "namespace": namespace,
        "fallback_counts": {str(k): v for k, v in compiled.fallback_counts.items()},
        "size_hints": dict(compiled.size_hints),
    }


def from_payload(payload: dict, decode: Callable[[list], Any], origin: str) -> CompiledGraph:
    device = torch.device(payload["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise NotRestorable("a CUDA graph without a CUDA device")
    configure_triton_cache()  # the binaries are where the cold compile put them
    groups = [_group(g) for g in payload["groups"]]
    module, path = load_module(payload["triton_source"])
    if device.type == "cuda" and not interpreting():
        hints = payload.get("size_hints") or None  # symbolic kernels: warmed on these
        compile_parallel(groups, module, payload["launch_layouts"], device, hints)
    source = payload["wrapper_source"]
    namespace = {**runtime_namespace(device)}
    namespace.update({name: decode(value) for name, value in payload["namespace"].items()})
    if "_current_stream" in source:
        namespace["_current_stream"] = current_stream_getter(device)
    for kernel in (k for g in groups for k in g.kernels):
        namespace[f"_k_{kernel.name}"] = getattr(module, kernel.name)
        runs = f"_run_{kernel.name}(" in source
        launches = f"_launch_{kernel.name}(" in source  # the compiled launch function itself
        if runs or launches:
            direct = kernel.direct
            if direct is None or (launches and direct.raw is None):
                raise NotRestorable(f"kernel {kernel.name} has no direct launch here")
            if runs:
                namespace[f"_run_{kernel.name}"] = direct.run
            if launches:
                namespace[f"_launch_{kernel.name}"] = direct.raw
            namespace[f"_fn_{kernel.name}"] = direct.function
            namespace[f"_meta_{kernel.name}"] = direct.packed_metadata
    exec(compile(source, origin, "exec"), namespace)
    compiled = CompiledGraph(
        namespace["call"],
        payload["triton_source"],
        source,
        groups,
        payload["fallback_counts"],
        device,
        path,
    )
    compiled.launch_layouts = payload["launch_layouts"]
    compiled.size_hints = dict(payload.get("size_hints", {}))
    return compiled


def _size_text(value: Any) -> int | str:
    """A kernel's point count: an int, or a symbolic size as text (read back by _size)."""
    expr = sympy.sympify(value)
    return int(expr) if expr.is_Integer else sympy.srepr(expr)


def _size(data: int | str) -> Any:
    if isinstance(data, int):
        return data
    # srepr names each symbol with its assumptions and each function (FloorDiv...) by name
    names = {n: getattr(indexing, n) for n in ("FloorDiv", "ModularIndexing")}
    return sympy.sympify(data, locals=names)


def _group(data: dict) -> GroupKernels:
    kernels = [
        TritonKernel(
            k["name"],
            k["code"],
            list(k["params"]),
            k["kind"],
            _size(k["xnumel"]),
            k["reduction"],
            LaunchConfig(**k["config"]),
            size_params=list(k.get("size_params", ())),
            rnumel=k.get("rnumel"),
        )
        for k in data["kernels"]
    ]
    workspaces = [Workspace(n, numel, getattr(torch, d)) for n, numel, d in data["workspaces"]]
    return GroupKernels(data["name"], kernels, set(data["register_only"]), workspaces)


__all__ = ["NotRestorable", "from_payload", "to_payload"]
