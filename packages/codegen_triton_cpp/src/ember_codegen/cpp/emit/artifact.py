"""A compiled C++ graph as plain data, and back (the C++ half of ``ember_codegen.artifact``).

What is kept: the C++ source (its kernel library comes from the kernel cache, rebuilt there
if it went missing), the wrapper's source, the kernels' signatures, the native runs, and the
wrapper's namespace encoded by the caller's ``encode`` (constants, dtypes, ops...), but for
what every wrapper holds (runtime_namespace) and what loading rebuilds (the ctypes functions;
the constants' data pointers, taken again from the loaded constants). A wrapper written per
binding of the size symbols is not kept.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from ember_codegen.cpp.build import compile_source
from ember_codegen.exc import NotRestorable

from .compiled import CompiledGraph, error_raiser, native_functions
from .kernel import KernelParam, KernelSource
from .launch_runs import LaunchRun
from .wrapper import runtime_namespace

#: wrapper globals rebuilt on load rather than stored
_BUILT_IN = {"__builtins__", "call", "_error", "_raise_kernel_error"}
_REBUILT_PREFIXES = ("_k_", "_run_")


def to_payload(compiled: CompiledGraph, encode: Callable[[Any], list]) -> dict:
    if not isinstance(compiled._call, types.FunctionType):  # a wrapper written per binding
        raise NotRestorable(f"the wrapper is a {type(compiled._call).__name__}, not one source")
    runtime = set(runtime_namespace())
    globals_ = compiled._call.__globals__
    namespace = {}
    for name, value in globals_.items():
        if name in _BUILT_IN or name in runtime or name.startswith(_REBUILT_PREFIXES):
            continue
        pointee = name.removeprefix("p_")
        if pointee != name and isinstance(globals_.get(pointee), torch.Tensor):
            if value != globals_[pointee].data_ptr():
                raise NotRestorable(f"wrapper pointer {name} is not its tensor's data pointer")
            namespace[name] = ["data_ptr", pointee]  # taken again from the loaded constant
            continue
        namespace[name] = encode(value)
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
        "target": compiled.target,
        "cpp_source": compiled.cpp_source,
        "wrapper_source": compiled.wrapper_source,
        "kernels": kernels,
        "runs": [run.to_data() for run in compiled.runs],
        "namespace": namespace,
        "fallback_counts": {str(k): v for k, v in compiled.fallback_counts.items()},
    }


def from_payload(payload: dict, decode: Callable[[list], Any], origin: str) -> CompiledGraph:
    """The graph ``to_payload`` described, its kernels loaded from the kernel cache; the
    wrapper compiled with ``origin`` as its file name."""
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
    namespace.update({name: decode(v) for name, v in encoded.items() if v[0] != "data_ptr"})
    for name, value in encoded.items():
        if value[0] == "data_ptr":
            namespace[name] = namespace[value[1]].data_ptr()
    by_name = {k.name: k for k in kernels}
    runs = [LaunchRun.from_data(run, by_name) for run in payload.get("runs", ())]
    library = None
    if kernels:
        library = compile_source(payload["cpp_source"])
        namespace.update(native_functions(library, kernels, runs))
    namespace["_raise_kernel_error"] = error_raiser(library)
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
