"""A compiled C++ graph as plain data, and back (the C++ half of ``ember_codegen.artifact``).

What is kept: the C++ source and which kernels and runs each of its translation units holds
(their libraries come from the kernel cache, rebuilt there if they went missing), the wrapper's source, the kernels' signatures, the native runs, and the
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

from ember_codegen.cpp.build import compile_many
from ember_codegen.exc import NotRestorable

from .compiled import CompiledGraph, load_units
from .kernel import KernelParam, KernelSource
from .launch_runs import LaunchRun
from .source import TranslationUnit
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
        "units": [
            [[k.name for k in unit.kernels], [r.name for r in unit.runs]] for unit in compiled.units
        ],
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
    units = _units(payload, by_name, runs)
    libraries = load_units(units, _builder(units, payload["cpp_source"]), namespace)
    exec(compile(payload["wrapper_source"], origin, "exec"), namespace)
    return CompiledGraph(
        namespace["call"],
        payload["cpp_source"],
        payload["wrapper_source"],
        kernels,
        libraries[0] if libraries else None,
        payload["fallback_counts"],
        runs,
        units,
        libraries,
    )


def _units(
    payload: dict, kernels: dict[str, KernelSource], runs: list[LaunchRun]
) -> list[TranslationUnit]:
    """The translation units the payload names (one of everything in older payloads)."""
    by_name = {run.name: run for run in runs}
    listed = payload.get("units") or [[list(kernels), list(by_name)]]
    return [
        TranslationUnit(tuple(kernels[k] for k in names), tuple(by_name[r] for r in run_names))
        for names, run_names in listed
    ]


def _builder(units: list[TranslationUnit], source: str) -> Callable:
    """Builds the units' sources on the default builder; a single unit's is the stored
    source itself (a payload of one unit written before units were recorded)."""

    def build(sources: list[str]) -> list:
        return compile_many([source] if len(units) == 1 else sources)

    return build
