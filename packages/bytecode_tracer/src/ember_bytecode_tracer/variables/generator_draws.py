"""A bound draw method of a library's global random generator (NumPy's RandomState,
Python's `random` module), called in a trace: its example value is drawn from a copy of the
generator's state, and the real draw happens per call as a graph input
(`OutputGraph.drawn_input`). The subclasses say what they draw and how."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source


class GeneratorDrawVariable(VariableTracker):
    label = ""  # how users name the generator's functions ("np.random", "random")

    def __init__(self, name: str, *, source: Source | None = None) -> None:
        super().__init__(source=source)
        self.name = name

    def python_type(self) -> type:
        return types.MethodType

    def constant_arguments(self, args, kwargs) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments as values: a draw's arguments must be known at trace time."""
        try:
            values = [a.as_python_constant() for a in args]
            kw_values = {k: v.as_python_constant() for k, v in kwargs.items()}
        except Unsupported as exc:
            raise Unsupported(f"{self.label}.{self.name}() with non-constant arguments") from exc
        return values, kw_values
