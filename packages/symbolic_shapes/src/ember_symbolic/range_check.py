"""Whether a guard on one symbol holds over a whole declared range.

A dim marked dynamic with an explicit `min`/`max` asks for one graph serving every size in
that range. A guard the trace records that some size in the range fails (`s0 != 3` for
[2, 5]) would send that size to another graph: `counterexample` finds such a size. It only
ever answers with a size it checked (never a false alarm): every size of a small range;
for a large or open one, the range's ends and the sizes around the guard's boundary.
"""

from __future__ import annotations

import sympy

from ember_symbolic.value_ranges import ValueRange

_ENUMERATE_AT_MOST = 256


def counterexample(cond: sympy.Basic, symbol: sympy.Symbol, span: ValueRange) -> int | None:
    """A size in `span` for which `cond` (over `symbol` alone) is false, or None."""
    for value in _candidates(cond, symbol, span):
        if span.contains(value) and cond.subs(symbol, value) is sympy.false:
            return value
    return None


def _candidates(cond: sympy.Basic, symbol: sympy.Symbol, span: ValueRange) -> list[int]:
    lo, hi = span.lo, span.hi
    if lo.is_finite and hi.is_finite and hi - lo < _ENUMERATE_AT_MOST:
        return list(range(int(lo), int(hi) + 1))
    found: set[int] = set()
    for end, step in ((lo, 1), (hi, -1)):
        if end.is_finite:
            found.update((int(end), int(end) + step))
    limit = _boundary(cond, symbol)
    if limit is not None and limit.is_finite:
        found.update(range(int(sympy.floor(limit)) - 1, int(sympy.ceiling(limit)) + 2))
    return sorted(found)


def _boundary(cond: sympy.Basic, symbol: sympy.Symbol) -> sympy.Expr | None:
    """Where a relation linear in `symbol` changes truth (`2*s0 > 7`: 7/2), else None."""
    if not isinstance(cond, sympy.Rel):
        return None
    diff = sympy.expand(cond.lhs - cond.rhs)
    constant, term = diff.as_independent(symbol, as_Add=True)
    coeff = sympy.simplify(term / symbol)
    if not coeff.is_Number or coeff == 0 or constant.free_symbols:
        return None
    return -constant / coeff
