"""`with torch.autocast(...)` blocks in a trace.

Entering puts `torch.amp.autocast_mode._enter_autocast(device, dtype, enabled, cache)` into
the graph and leaving puts `_exit_autocast(mode)`, so the graph runs its ops under the same
autocast state eager code would, and a backend that retraces the graph sees the casts. The
state is switched at trace time too, so example values get autocast's dtypes. A trace that
stops inside a block (a graph break, an error) leaves it open: `close_trace_time_autocasts`
closes what is left, and the runner restores the thread's autocast state if the graph
raises between the two nodes (`AutocastState`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.amp import autocast_mode

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import Guard, GuardKind, TorchStateSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable

AUTOCAST_CLASSES = tuple(
    cls
    for cls in (torch.amp.autocast, getattr(torch.cpu.amp, "autocast", None))
    if isinstance(cls, type)
)
ENTER, EXIT = autocast_mode._enter_autocast, autocast_mode._exit_autocast
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
        from ember_bytecode_tracer.variables.contexts import ContextExitVariable

        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        tx.output.graph.call_function(EXIT, (self.node,))
        if _OPEN_AT_TRACE_TIME and _OPEN_AT_TRACE_TIME[-1] is self.mode:
            _OPEN_AT_TRACE_TIME.pop()
            EXIT(self.mode)


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


@dataclass(frozen=True)
class AutocastState:
    """The thread's autocast flags and dtypes, to restore when a graph raises mid-block."""

    flags: tuple

    @staticmethod
    def devices() -> tuple[str, ...]:
        return ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)

    @classmethod
    def now(cls) -> AutocastState:
        return cls(
            tuple(
                (d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                for d in cls.devices()
            )
        )

    def guards(self) -> list:
        """What a trace depends on: whether any autocast is on (one cheap check), and when
        one is, each device's flag and dtype (ops were traced producing those dtypes)."""

        enabled = any(flag for _, flag, _ in self.flags)
        out = [Guard(TorchStateSource("any_autocast"), GuardKind.EQUALS_MATCH, enabled)]
        if enabled:
            for device, flag, dtype in self.flags:
                out.append(
                    Guard(
                        TorchStateSource("autocast_enabled", device), GuardKind.EQUALS_MATCH, flag
                    )
                )
                out.append(
                    Guard(TorchStateSource("autocast_dtype", device), GuardKind.EQUALS_MATCH, dtype)
                )
        return out

    def wrap_graph(self, graph: torch.fx.Graph) -> None:
        """A graph traced under an ambient autocast means what it computes only under it:
        make that explicit (enter at the first op, exit before the output is added), so a
        backend that retraces the graph applies the same casts."""
        enabled = [(d, dtype) for d, flag, dtype in self.flags if flag]
        first = next((n for n in graph.nodes if n.op != "placeholder"), None)
        if not enabled or first is None:
            return
        cache = torch.is_autocast_cache_enabled()
        modes = []
        with graph.inserting_before(first):
            for device, dtype in enabled:
                modes.append(graph.call_function(ENTER, (device, dtype, True, cache)))
        for mode in reversed(modes):
            graph.call_function(EXIT, (mode,))

    def restore(self) -> None:
        for device, enabled, dtype in self.flags:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
