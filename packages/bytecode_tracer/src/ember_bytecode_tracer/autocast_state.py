"""The thread's autocast state: what a trace guards, and what a runner restores when a
graph raises inside an autocast block (variables/autocast_context.py traces the blocks)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.amp import autocast_mode

from ember_bytecode_tracer.guards import Guard, GuardKind, TorchStateSource

ENTER, EXIT = autocast_mode._enter_autocast, autocast_mode._exit_autocast


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
