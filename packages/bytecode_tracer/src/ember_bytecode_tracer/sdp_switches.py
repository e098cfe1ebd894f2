"""The scaled-dot-product-attention backend flags (`torch.nn.attention.sdpa_kernel`,
`torch.backends.cuda.enable_math_sdp`...) as global state switched inside a trace.

A setter (`torch._C._set_sdp_use_math(False)`) called with a known bool becomes a graph op
kept in the graph (its result is None) and is also run at trace time, so the SDPA calls
traced after it, and the flag reads after it, see the state the code switched to; the
first read of a flag before any switch is guarded (its value at frame entry). After each
trace the flags go back to what they were when it started. A graph may switch them only
for a while (a `with sdpa_kernel(...)` block closed inside it): one that would end with a
flag changed is refused, as a backend that traces its graph again (AOT) runs the switches
at its own trace time, not when the graph runs.
"""

from __future__ import annotations

from typing import Any

import torch

_NAMES = ("flash", "mem_efficient", "math", "cudnn", "overrideable")

# setter -> the query of the same flag
SDP_SWITCHES: dict[Any, Any] = {
    getattr(torch._C, f"_set_sdp_use_{name}"): getattr(torch._C, f"_get_{name}_sdp_enabled")
    for name in _NAMES
    if hasattr(torch._C, f"_set_sdp_use_{name}") and hasattr(torch._C, f"_get_{name}_sdp_enabled")
}


def snapshot() -> dict[Any, bool]:
    """Every flag now, by setter."""
    return {setter: bool(query()) for setter, query in SDP_SWITCHES.items()}


def restore(saved: dict[Any, bool]) -> None:
    for setter, value in saved.items():
        if SDP_SWITCHES[setter]() != value:
            setter(value)


def changed_since(saved: dict[Any, bool]) -> list[str]:
    """The flags (by setter name) that differ from `saved`."""
    return [setter.__name__ for setter, v in saved.items() if SDP_SWITCHES[setter]() != v]
