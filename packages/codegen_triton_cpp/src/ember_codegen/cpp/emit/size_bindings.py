"""Symbolic sizes in the wrapper: the C++ kernels are compiled once with the size symbols as
int64 arguments; the Python wrapper around them is written for one binding of the symbols
(the values read from a call's inputs) and cached per binding, so every int the wrapper
prints (buffer sizes, strides, views, kernel size arguments) is that binding's."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import sympy

#: symbol name -> value (by name: the same symbol may be rebuilt with other assumptions)
_BINDINGS: contextvars.ContextVar[Mapping[str, int]] = contextvars.ContextVar(
    "ember_cpp_size_bindings", default=MappingProxyType({})
)


def concrete(value: Any) -> int:
    """`value` as an int, its size symbols replaced by the current binding."""
    if isinstance(value, int):
        return value
    expr = sympy.sympify(value)
    if not isinstance(expr, sympy.Basic):
        return int(expr)
    if expr.free_symbols:
        values = _BINDINGS.get()
        expr = sympy.sympify(
            expr.xreplace(
                {s: sympy.Integer(values[s.name]) for s in expr.free_symbols if s.name in values}
            )
        )
        if expr.free_symbols:
            raise ValueError(
                f"size {value} has unbound symbols {sorted(map(str, expr.free_symbols))}"
            )
    return int(expr)


def value_of(name: str) -> int:
    """The bound value of the size symbol called `name`."""
    return _BINDINGS.get()[name]


def is_symbolic(value: Any) -> bool:
    return bool(getattr(value, "free_symbols", None))


@contextlib.contextmanager
def bound(values: Mapping[str, int]) -> Iterator[None]:
    token = _BINDINGS.set(dict(values))
    try:
        yield
    finally:
        _BINDINGS.reset(token)
