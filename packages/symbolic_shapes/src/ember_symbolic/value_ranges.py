"""Integer value ranges of symbols and conservative bounds of expressions over them.

Bounds are interval arithmetic over a handful of sympy node types; anything else is
unbounded. They only ever let us *prove* a condition (statically known), so being loose is
safe: a looser bound means a guard is recorded instead of skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sympy

oo = sympy.oo


@dataclass(frozen=True)
class ValueRange:
    """Closed interval [lo, hi]; ends are sympy Integers, -oo or oo."""

    lo: sympy.Expr
    hi: sympy.Expr

    @staticmethod
    def of(lo: int | None, hi: int | None) -> ValueRange:
        return ValueRange(
            -oo if lo is None else sympy.Integer(lo), oo if hi is None else sympy.Integer(hi)
        )

    @staticmethod
    def unknown() -> ValueRange:
        return ValueRange(-oo, oo)

    def contains(self, value: int) -> bool:
        return bool(self.lo <= value) and bool(value <= self.hi)

    def intersect(self, other: ValueRange) -> ValueRange:
        return ValueRange(sympy.Max(self.lo, other.lo), sympy.Min(self.hi, other.hi))

    # the names torch's helpers read on a range (see torch_protocol.py)
    @property
    def lower(self) -> sympy.Expr:
        return self.lo

    @property
    def upper(self) -> sympy.Expr:
        return self.hi

    def is_singleton(self) -> bool:
        return self.lo == self.hi

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


def _add(a: ValueRange, b: ValueRange) -> ValueRange:
    return ValueRange(a.lo + b.lo, a.hi + b.hi)


def _products(a: ValueRange, b: ValueRange) -> list[sympy.Expr]:
    out = []
    for x in (a.lo, a.hi):
        for y in (b.lo, b.hi):
            # 0 * oo is nan in sympy; the product of a zero end is 0 for integers
            out.append(sympy.Integer(0) if x == 0 or y == 0 else x * y)
    return out


def _mul(a: ValueRange, b: ValueRange) -> ValueRange:
    products = _products(a, b)
    return ValueRange(sympy.Min(*products), sympy.Max(*products))


def _pow(base: ValueRange, exp: sympy.Expr) -> ValueRange:
    if not (exp.is_Integer and exp >= 0 and base.lo >= 0):
        return ValueRange.unknown()
    return ValueRange(base.lo**exp, base.hi**exp)


def _floor_div(num: ValueRange, den: ValueRange) -> ValueRange:
    """floor(num / den) for den > 0, num >= 0: monotone in each argument."""
    if not (den.lo > 0 and num.lo >= 0):
        return ValueRange.unknown()
    hi = oo if num.hi == oo else sympy.floor(num.hi / den.lo)
    lo = sympy.Integer(0) if den.hi == oo else sympy.floor(num.lo / den.hi)
    return ValueRange(lo, hi)


def bound(expr: sympy.Basic, ranges: Mapping[sympy.Symbol, ValueRange]) -> ValueRange:
    """A range that surely holds `expr` given each symbol's range (unknown symbols: any int)."""
    if expr.is_Number:
        return ValueRange(expr, expr)
    if isinstance(expr, sympy.Symbol):
        return ranges.get(expr, ValueRange.unknown())
    handler = _HANDLERS.get(type(expr).__name__)
    if handler is None:
        return ValueRange.unknown()
    return handler(expr, ranges)


def _bound_add(expr: sympy.Add, ranges: Mapping) -> ValueRange:
    total = ValueRange(sympy.Integer(0), sympy.Integer(0))
    for arg in expr.args:
        total = _add(total, bound(arg, ranges))
    return total


def _bound_mul(expr: sympy.Mul, ranges: Mapping) -> ValueRange:
    total = ValueRange(sympy.Integer(1), sympy.Integer(1))
    for arg in expr.args:
        total = _mul(total, bound(arg, ranges))
    return total


def _bound_floor(expr: sympy.floor, ranges: Mapping) -> ValueRange:
    num, den = expr.args[0].as_numer_denom()
    if den.is_Integer and den > 0:
        return _floor_div(bound(num, ranges), ValueRange(den, den))
    inner = bound(expr.args[0], ranges)
    return ValueRange(sympy.floor(inner.lo) if inner.lo.is_finite else inner.lo, inner.hi)


def _bound_mod(expr: sympy.Mod, ranges: Mapping) -> ValueRange:
    num, den = bound(expr.args[0], ranges), bound(expr.args[1], ranges)
    if den.lo > 0:  # Python/sympy modulo with a positive divisor lies in [0, divisor - 1]
        if num.lo >= 0 and num.hi < den.lo:  # the numerator is already below the divisor
            return num
        return ValueRange(sympy.Integer(0), den.hi - 1)
    return ValueRange.unknown()


def _bound_minmax(pick: Callable) -> Callable:
    def handler(expr: sympy.Basic, ranges: Mapping) -> ValueRange:
        parts = [bound(a, ranges) for a in expr.args]
        return ValueRange(pick(*(p.lo for p in parts)), pick(*(p.hi for p in parts)))

    return handler


_HANDLERS: dict[str, Callable[[sympy.Basic, Mapping], ValueRange]] = {
    "Add": _bound_add,
    "Mul": _bound_mul,
    "Pow": lambda e, r: _pow(bound(e.args[0], r), e.args[1]),
    "floor": _bound_floor,
    "Mod": _bound_mod,
    "Max": _bound_minmax(sympy.Max),
    "Min": _bound_minmax(sympy.Min),
}
