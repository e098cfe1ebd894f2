"""Global state a trace may switch for a while and switch back: the scaled-dot-product-
attention backend flags (`torch.nn.attention.sdpa_kernel`, `torch.backends.cuda.
enable_math_sdp`...) and the default dtype (`torch.set_default_dtype` in a context manager).

A setter (`torch._C._set_sdp_use_math(False)`, `torch.set_default_dtype(torch.float64)`)
called with a known value becomes a graph op kept in the graph (its result is None) and is
also run at trace time, so the ops traced after it (an SDPA call, `torch.tensor([1.0])`)
and the state's reads after it see what the code switched to; the first read of the state
before any switch is guarded (its value at frame entry). After each trace the state goes
back to what it was when the trace started. A graph may switch it only for a while (a
`with` block closed inside it): one that would end with the state changed is refused, as
a backend that traces its graph again (AOT) runs the switches at its own trace time, not
when the graph runs. Context variables (`contextvars.ContextVar`, which torch's
`sdpa_kernel` also sets for a while) are Python state read by traced Python code: their
sets live in the trace only (TracedContextVars), under the same rule at the graph's end.
"""

from __future__ import annotations

import contextvars
from typing import Any

import torch

_NAMES = ("flash", "mem_efficient", "math", "cudnn", "overrideable")

# setter -> (the query of the same state, the type of value it takes)
SWITCHES: dict[Any, tuple[Any, type]] = {
    getattr(torch._C, f"_set_sdp_use_{name}"): (getattr(torch._C, f"_get_{name}_sdp_enabled"), bool)
    for name in _NAMES
    if hasattr(torch._C, f"_set_sdp_use_{name}") and hasattr(torch._C, f"_get_{name}_sdp_enabled")
}
SWITCHES[torch.set_default_dtype] = (torch.get_default_dtype, torch.dtype)
SWITCHES[torch._C._set_default_dtype] = (torch.get_default_dtype, torch.dtype)


def snapshot() -> dict[Any, Any]:
    """Each switched state now, by setter."""
    return {setter: query() for setter, (query, _) in SWITCHES.items()}


def restore(saved: dict[Any, Any]) -> None:
    for setter, value in saved.items():
        if SWITCHES[setter][0]() != value:
            setter(value)


def changed_since(saved: dict[Any, Any]) -> list[str]:
    """The states (by setter name) that differ from `saved`."""
    return [s.__name__ for s, value in saved.items() if SWITCHES[s][0]() != value]


# A ContextVar with no value and no default: every get() of it raises LookupError.
UNSET = object()


def context_var_value(var: contextvars.ContextVar) -> Any:
    """`var`'s value in the current context (its default where unset), or UNSET."""
    try:
        return var.get()  # not var.get(UNSET): an explicit default overrides the var's own
    except LookupError:
        return UNSET


class TracedContextVars:
    """The values a trace set its context variables to (variables/context_vars.py): kept in
    the trace only, never in the real variable; a graph must end with each as at entry."""

    def __init__(self) -> None:
        self._values: dict[int, tuple[contextvars.ContextVar, Any]] = {}

    def set_in_trace(self, var: contextvars.ContextVar) -> bool:
        return id(var) in self._values

    def current(self, var: contextvars.ContextVar) -> Any:
        return self._values[id(var)][1]

    def record(self, var: contextvars.ContextVar, value: Any) -> None:
        self._values[id(var)] = (var, value)

    def left_set(self) -> list[str]:
        """The names of the variables the trace leaves with another value than at entry."""
        return [
            var.name
            for var, value in self._values.values()
            if not _same_value(value, context_var_value(var))
        ]


def _same_value(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)
