"""What `ember.compile(mode=..., options=...)` asks of the inductor backend.

Modes (torch.compile's names): "default"; "reduce-overhead" runs GPU graphs under CUDA graphs;
"max-autotune" also benchmarks kernel configurations (and the Triton matmul template against
cuBLAS); "max-autotune-no-cudagraphs" autotunes without CUDA graphs. Options override single
settings: {"target": "cpp" | "triton", "max_autotune": bool, "triton.cudagraphs": bool,
"dynamic_specializations": int, "cudagraph_sizes": int}.
`EMBER_INDUCTOR_TARGET=triton` forces the Triton target (with TRITON_INTERPRET=1 it runs on CPU
tensors: that is how CI tests the GPU code path).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ember.exc import EmberError

CODEGEN_TARGETS = ("cpp", "triton")
_MODE_SETTINGS = {
    None: {},
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"autotune": True},
}
_OPTION_FIELDS = {
    "target": "target",
    "max_autotune": "autotune",
    "triton.cudagraphs": "cudagraphs",
    "dynamic_specializations": "dynamic_specializations",
    "cudagraph_sizes": "cudagraph_sizes",
}
#: options that take an int >= 0
_COUNT_FIELDS = ("dynamic_specializations", "cudagraph_sizes")


@dataclass(frozen=True)
class InductorSettings:
    #: ember-codegen target; None: from the tensors' device (cpu -> cpp, cuda -> triton)
    target: str | None = None
    autotune: bool = False
    cudagraphs: bool = False
    #: a graph with symbolic sizes the loop IR cannot compile symbolically is compiled once
    #: per concrete size signature, at most this many times; later sizes run the prim graph
    #: as an FX graph (size_specialization.py)
    dynamic_specializations: int = 8
    #: under CUDA graphs, a graph with symbolic sizes keeps one capture per concrete size
    #: signature for the first this many signatures; later sizes run without a capture
    #: (cudagraphs.py)
    cudagraph_sizes: int = 8

    def describe(self) -> str:
        return f"target={self.target} autotune={self.autotune} cudagraphs={self.cudagraphs}"


def inductor_settings(
    mode: str | None = None, options: dict[str, Any] | None = None
) -> InductorSettings:
    """Settings for a mode and options; a typed error names what is wrong."""
    if mode not in _MODE_SETTINGS:
        raise EmberError(f"mode must be one of {list(_MODE_SETTINGS)}, got {mode!r}")
    settings = replace(InductorSettings(), **_MODE_SETTINGS[mode])
    forced = os.environ.get("EMBER_INDUCTOR_TARGET")
    if forced:
        settings = replace(settings, target=_checked_target(forced, "EMBER_INDUCTOR_TARGET"))
    for key, value in (options or {}).items():
        field = _OPTION_FIELDS.get(key)
        if field is None:
            raise EmberError(
                f"unknown inductor option {key!r}; known options: {', '.join(_OPTION_FIELDS)}"
            )
        if field == "target":
            value = _checked_target(value, "options['target']")
        elif field in _COUNT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise EmberError(f"inductor option {key!r} must be an int >= 0, got {value!r}")
        elif not isinstance(value, bool):
            raise EmberError(f"inductor option {key!r} must be True or False, got {value!r}")
        settings = replace(settings, **{field: value})
    return settings


def _checked_target(value: object, where: str) -> str:
    if value not in CODEGEN_TARGETS:
        raise EmberError(f"{where} must be one of {CODEGEN_TARGETS}, got {value!r}")
    return str(value)
