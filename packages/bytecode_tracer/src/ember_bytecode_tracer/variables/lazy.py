"""Frame locals are wrapped (and guarded) on first use, so unused arguments cost nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.variables.base import VariableTracker

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class LazyLocal(VariableTracker):
    def __init__(self, value: Any, source: Source) -> None:
        super().__init__(source=source)
        self.value = value

    def __repr__(self) -> str:
        return f"LazyLocal({self.source})"


def resolve_local(tx: Translator, name: str) -> VariableTracker:
    value = tx.symbolic_locals[name]
    if isinstance(value, LazyLocal):
        value = tx.wrap(value.value, value.source)
        tx.symbolic_locals[name] = value
    return value
