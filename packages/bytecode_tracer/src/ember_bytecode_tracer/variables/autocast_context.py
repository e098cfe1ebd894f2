"""`with torch.autocast(...)` blocks in a trace.

Entering puts `torch.amp.autocast_mode._enter_autocast(device, dtype, enabled, cache)` into
the graph and leaving puts `_exit_autocast(mode)`, so the graph runs its ops under the same
autocast state eager code would, and a backend that retraces the graph sees the casts. The
state is switched at trace time too, so example values get autocast's dtypes. A trace that
stops inside a block (a graph break, an error) leaves it open: `close_trace_time_autocasts`
closes what is left, and the runner restores the thread's autocast state if the graph
raises between the two nodes (`autocast_state.AutocastState`).
"""

from __future__ import annotations

from typing import Any

import torch

from ember_bytecode_tracer.autocast_state import ENTER, EXIT
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.contexts import ContextExitVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

AUTOCAST_CLASSES = tuple(
    cls
    for cls in (torch.amp.autocast, getattr(torch.cpu.amp, "autocast", None))
    if isinstance(cls, type)
)
# Modes entered at trace time and not left yet (the hook never traces re-entrantly).
_OPEN_AT_TRACE_TIME: list[Any] = []
_PARAMETERS = ("device_type", "dtype", "enabled", "cache_enabled")


class AutocastVariable(VariableTracker):
    """An autocast context manager made in the trace (not entered yet)."""

    def __init__(self, values: tuple) -> None:
        super().__init__()
        self.values = values  # (device_type, dtype, enabled, cache_enabled), all constants
        self.node: torch.fx.Node | None = None
        self.mode: Any = None

    def enter(self, tx) -> VariableTracker:
        if self.node is not None:
            raise Unsupported("entering one torch.autocast object twice")
        self.node = tx.output.graph.call_function(ENTER, self.values)
        self.mode = ENTER(*self.values)
        _OPEN_AT_TRACE_TIME.append(self.mode)
        return ConstantVariable(None)

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        tx.output.graph.call_function(EXIT, (self.node,))
        if _OPEN_AT_TRACE_TIME and _OPEN_AT_TRACE_TIME[-1] is self.mode:
            _OPEN_AT_TRACE_TIME.pop()
            EXIT(self.mode)


@constructor("autocast")
def _construct_autocast(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if kind.cls in AUTOCAST_CLASSES:
        return make_autocast(kind.cls, args, kwargs)
    return None


def make_autocast(cls: type, args, kwargs) -> AutocastVariable:
    try:
        given = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
    except Unsupported:
        raise Unsupported("torch.autocast() with arguments unknown at trace time") from None
    if cls is not torch.amp.autocast:  # torch.cpu.amp.autocast(dtype=...): device fixed
        given = ["cpu", *given]
    bound = dict(zip(_PARAMETERS, given, strict=False))
    bound.update(named)
    # The eager constructor checks and fills the defaults (dtype per device, cache flag).
    real = torch.amp.autocast(**bound)
    values = (real.device, real.fast_dtype, real._enabled, real._cache_enabled)
    return AutocastVariable(values)


def close_trace_time_autocasts() -> None:
    """Leaves the modes a stopped trace left open, innermost first."""
    while _OPEN_AT_TRACE_TIME:
        EXIT(_OPEN_AT_TRACE_TIME.pop())
