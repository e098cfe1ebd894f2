"""f-strings over symbolic values: the string is made, and the value specialized (a shape
guard `Eq(s0, 10)`), when the string is used, not when the f-string runs. An f-string whose
result is dropped (an expression statement, a debug line left in) guards nothing, as its
formatting of an int or a float has no effect of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_bytecode_tracer.variables.base import PROBING, VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable

_CONVERSIONS: dict[int, Callable[[Any], Any]] = {0: lambda v: v, 1: str, 2: repr, 3: ascii}


class LazyFormat(ConstantVariable):
    """A str constant computed on first read of `value` (every use of a constant reads it:
    `as_python_constant`, rebuilding it after the graph); dropping it reads nothing."""

    def __init__(self, make: Callable[[], str]) -> None:
        VariableTracker.__init__(self)
        self._make: Callable[[], str] | None = make
        self._value = ""

    @property  # type: ignore[override]
    def value(self) -> str:
        if self._make is not None:
            make, self._make = self._make, None
            saved, PROBING[0] = PROBING[0], 0  # a use, even while probing: specialize now
            try:
                self._value = make()
            finally:
                PROBING[0] = saved
        return self._value

    @value.setter
    def value(self, value: str) -> None:
        self._value, self._make = value, None

    def python_type(self) -> type:
        return str

    def is_python_constant(self) -> bool:
        return True  # it is one, once read

    def __repr__(self) -> str:
        return "LazyFormat(<unread>)" if self._make is not None else f"LazyFormat({self._value!r})"


def format_value(value: VariableTracker, conversion: int, spec: str) -> VariableTracker:
    """FORMAT_VALUE: `format(conversion(value), spec)`; lazy over a symbolic int or float."""
    convert = _CONVERSIONS[conversion]
    if isinstance(value, SymNodeVariable):
        return LazyFormat(lambda: format(convert(value.as_python_constant()), spec))
    return ConstantVariable(format(convert(value.as_python_constant()), spec))


def build_string(parts: list[VariableTracker]) -> VariableTracker:
    """BUILD_STRING: the parts joined; lazy while a part is."""
    if any(isinstance(p, LazyFormat) and p._make is not None for p in parts):
        return LazyFormat(lambda: "".join(p.as_python_constant() for p in parts))
    return ConstantVariable("".join(p.as_python_constant() for p in parts))
