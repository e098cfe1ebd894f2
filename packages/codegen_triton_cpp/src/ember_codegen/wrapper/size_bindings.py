"""Symbolic sizes in the wrapper (either target): the kernels are compiled once with the
size symbols as int arguments. The Python wrapper around them is written either

- once for every binding (`symbolic(env)`, dynamic_wrapper.symbolic_wrapper_call): `concrete()` and
  `value_of()` return `PySize`s, which print as Python expressions over locals named after
  the symbols (read from the inputs at the top of `call`) and decide comparisons only where
  they hold for every binding (structural equality, or proved by the env's ranges), raising
  `NeedsConcreteSizes` where a decision would depend on the values; or
- per binding (`bound(values)`, dynamic_wrapper.py, the fallback): every int the wrapper
  prints (buffer sizes, strides, views, kernel size arguments) is that binding's."""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import sympy

# the Python size printer and its refusal are target-neutral (the Triton wrapper's too)
from ember_codegen.size_printing import NeedsConcreteSizes, python_size

#: symbol name -> value (by name: the same symbol may be rebuilt with other assumptions), or
#: a SymbolicSizes (the wrapper is written for every binding)
_BINDINGS: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "ember_size_bindings", default=MappingProxyType({})
)


#: wrappers of symbolic graphs: "symbolic" (graphs one wrapper serves), "per_binding_fallback"
#: (graphs whose wrapper is written per binding), "wrapper_execs" (wrapper sources exec'd)
WRAPPER_STATS: Counter = Counter()


class SymbolicSizes:
    """The binding `symbolic(env)` installs: sizes stay expressions; `used` collects the
    symbols the wrapper reads (their locals are assigned at the top of `call`)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.used: set[str] = set()

    def size(self, expr: sympy.Basic) -> int | PySize:
        if not expr.free_symbols:
            return int(expr)
        self.used |= {s.name for s in expr.free_symbols}
        return PySize(expr, self)

    def decide(self, condition: sympy.Basic) -> bool:
        known = self.env.static_value(condition) if self.env is not None else None
        if known is None:
            raise NeedsConcreteSizes(f"{condition} depends on the sizes' values")
        return bool(known)

    def canonical(self, expr: sympy.Basic) -> sympy.Basic:
        simplified = self.env.simplify(expr) if self.env is not None else expr
        return sympy.expand(simplified)


def _sym(value: Any) -> sympy.Basic:
    return value.expr if isinstance(value, PySize) else sympy.sympify(value)


class PySize:
    """A size of every binding: prints as Python over the symbols' locals (python_size);
    equal only when structurally equal; ordered only where the env proves the order."""

    __slots__ = ("_key", "expr", "sizes")

    def __init__(self, expr: sympy.Basic, sizes: SymbolicSizes) -> None:
        self.expr = expr
        self.sizes = sizes
        self._key = sizes.canonical(expr)

    def __repr__(self) -> str:
        return python_size(self.expr)

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PySize):
            return self._key == other._key
        if isinstance(other, int | sympy.Basic):
            return self._key == self.sizes.canonical(sympy.sympify(other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __bool__(self) -> bool:
        """Nonzero unless structurally 0 (callers print more, never less, when unsure)."""
        return self._key != 0

    def _arith(self, other: Any, fn: Any) -> int | PySize:
        if not isinstance(other, int | PySize | sympy.Basic):
            return NotImplemented
        return self.sizes.size(sympy.sympify(fn(self.expr, _sym(other))))

    def __add__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: a + b)

    def __radd__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: b + a)

    def __sub__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: a - b)

    def __rsub__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: b - a)

    def __mul__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: a * b)

    def __rmul__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: b * a)

    def _order(self, other: Any, relation: Any) -> bool:
        if not isinstance(other, int | PySize | sympy.Basic):
            return NotImplemented
        return self.sizes.decide(relation(self.expr, _sym(other)))

    def __lt__(self, other: Any) -> bool:
        return self._order(other, sympy.Lt)

    def __le__(self, other: Any) -> bool:
        return self._order(other, sympy.Le)

    def __gt__(self, other: Any) -> bool:
        return self._order(other, sympy.Gt)

    def __ge__(self, other: Any) -> bool:
        return self._order(other, sympy.Ge)

    def __index__(self) -> int:
        raise NeedsConcreteSizes(f"{self.expr} used as an int")

    __int__ = __index__


@contextlib.contextmanager
def symbolic(env: Any) -> Iterator[SymbolicSizes]:
    """Write the wrapper for every binding: see SymbolicSizes and PySize."""
    sizes = SymbolicSizes(env)
    token = _BINDINGS.set(sizes)
    try:
        yield sizes
    finally:
        _BINDINGS.reset(token)


def concrete(value: Any) -> int:
    """`value` as an int, its size symbols replaced by the current binding (a PySize when
    the wrapper is written for every binding)."""
    if isinstance(value, int | PySize):
        return value
    if isinstance(value, sympy.Integer):  # most sizes and strides: no symbols to look for
        return int(value)
    expr = sympy.sympify(value)
    if not isinstance(expr, sympy.Basic):
        return int(expr)
    if expr.free_symbols:
        values = _BINDINGS.get()
        if isinstance(values, SymbolicSizes):
            return values.size(expr)
        expr = sympy.sympify(
            expr.xreplace(
                {s: sympy.Integer(values[s.name]) for s in expr.free_symbols if s.name in values}
            )
        )
        if expr.free_symbols:
            raise ValueError(
                f"size {value} has unbound symbols {sorted(map(str, expr.free_symbols))}"
            )
    if isinstance(expr, sympy.logic.boolalg.BooleanAtom):  # a SymBool output (`n != 0`)
        return bool(expr)
    return int(expr)


def value_of(name: str) -> int:
    """The bound value of the size symbol called `name`."""
    values = _BINDINGS.get()
    if isinstance(values, SymbolicSizes):
        return values.size(sympy.Symbol(name, integer=True, positive=True))
    return values[name]


def is_symbolic(value: Any) -> bool:
    return bool(getattr(value, "free_symbols", None))


@contextlib.contextmanager
def bound(values: Mapping[str, int]) -> Iterator[None]:
    token = _BINDINGS.set(dict(values))
    try:
        yield
    finally:
        _BINDINGS.reset(token)
