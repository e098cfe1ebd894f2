"""Sympy index arithmetic: iteration variables, integer division, and index simplification.

Index expressions are sympy expressions over non-negative integer iteration variables
(``i0, i1, ...`` for the outer/pointwise loops, ``r0, r1, ...`` for reduction loops).
``FloorDiv`` and ``ModularIndexing`` are our own sympy functions so that reshapes can be
expressed exactly and then folded back by ``simplify_index`` (sympy alone does not fold
``4*floor(x/4) + Mod(x, 4)`` to ``x``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import sympy

Expr = sympy.Expr


@functools.cache
def index_symbol(prefix: str, n: int) -> sympy.Symbol:
    """The n-th iteration variable of a loop family (``i`` outer, ``r`` reduction)."""
    return sympy.Symbol(f"{prefix}{n}", integer=True, nonnegative=True)


def index_vars(prefix: str, count: int) -> list[sympy.Symbol]:
    return [index_symbol(prefix, n) for n in range(count)]


def as_expr(value: object) -> Expr:
    """An int, SymInt-free number or sympy expression as a sympy expression."""
    if isinstance(value, sympy.Basic):
        return value  # type: ignore[return-value]
    if isinstance(value, bool):
        return sympy.Integer(int(value))
    if isinstance(value, int):
        return sympy.Integer(value)
    raise TypeError(f"expected an int or a sympy expression for a size/index, got {value!r}")


def as_exprs(values: Sequence[object]) -> list[Expr]:
    return [as_expr(v) for v in values]


class FloorDiv(sympy.Function):
    """floor(base / divisor) for non-negative integer operands."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        if divisor.is_Integer and base.is_Add:
            # Terms that are whole multiples of the divisor leave the floor.
            outside, inside = [], []
            for term in base.args:
                coeff, rest = term.as_coeff_Mul()
                if coeff.is_Integer and int(coeff) % int(divisor) == 0:
                    outside.append(sympy.Integer(int(coeff) // int(divisor)) * rest)
                else:
                    inside.append(term)
            if outside:
                # The constant's multiples of the divisor leave too: what stays inside must
                # remain non-negative (C++ divides truncating), else do not simplify.
                rest, shift = _split_constant(sympy.Add(*inside), int(divisor))
                if rest.is_nonnegative:
                    return sympy.Add(*outside) + shift + FloorDiv(rest, divisor)
        return None


def _split_constant(expr: Expr, period: int) -> tuple[Expr, int]:
    """(expr - k*period, k) with the constant term of the first reduced into [0, period)."""
    constant, _ = expr.as_coeff_Add()
    k = int(constant) // period if constant.is_Integer else 0
    return expr - k * period, k


class ModularIndexing(sympy.Function):
    """(base // divisor) % modulus for non-negative integer operands: one mixed-radix digit."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if divisor.is_Integer and modulus.is_Integer and base.is_Add:
            # Terms that are multiples of divisor*modulus do not change the digit.
            period = int(divisor) * int(modulus)
            if period == 0:
                return None  # a digit of an empty range: nothing to simplify
            kept = [
                t
                for t in base.args
                if not (t.as_coeff_Mul()[0].is_Integer and int(t.as_coeff_Mul()[0]) % period == 0)
            ]
            if len(kept) != len(base.args):
                # Keep the base non-negative (C++'s % truncates): shift the constant into
                # [0, period), and give up if the rest could still go negative.
                rest, _ = _split_constant(sympy.Add(*kept), period)
                if rest.is_nonnegative:
                    return ModularIndexing(rest, divisor, modulus)
        return None


def upper_bound(expr: Expr, var_ranges: Mapping[sympy.Symbol, Expr]) -> int | None:
    """An exclusive integer upper bound of a non-negative index expression, if one is known."""
    if expr.is_Integer:
        return int(expr) + 1
    if isinstance(expr, sympy.Symbol):
        bound = var_ranges.get(expr)
        return int(bound) if bound is not None and bound.is_Integer else None
    if isinstance(expr, ModularIndexing) and expr.args[2].is_Integer:
        return int(expr.args[2])
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer:
        inner = upper_bound(expr.args[0], var_ranges)
        return None if inner is None else (inner - 1) // int(expr.args[1]) + 1
    if expr.is_Add:
        total = 0
        for term in expr.args:
            bound = upper_bound(term, var_ranges)
            if bound is None:
                return None
            total += bound - 1
        return total + 1
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if rest.is_Mul and coeff == 1:  # a product of non-negative factors (symbolic sizes)
            largest = 1
            for factor in rest.args:
                bound = upper_bound(factor, var_ranges)
                if bound is None:
                    return None
                largest *= bound - 1
            return largest + 1
        if coeff.is_Integer and int(coeff) >= 0:
            bound = upper_bound(rest, var_ranges)
            return None if bound is None else int(coeff) * (bound - 1) + 1
    return None


def _digits(expr: Expr) -> tuple[Expr, Expr, Expr | None] | None:
    """View FloorDiv / ModularIndexing / a bare term as digit (base, divisor, modulus|None)."""
    if isinstance(expr, ModularIndexing):
        return expr.args[0], expr.args[1], expr.args[2]
    if isinstance(expr, FloorDiv):
        return expr.args[0], expr.args[1], None
    return None


def _fold_bounded(expr: Expr, var_ranges: Mapping[sympy.Symbol, Expr]) -> Expr:
    """Drop digits that are provably whole: x % m with x < m is x, x // d with x < d is 0."""

    def fold(node: Expr) -> Expr:
        if isinstance(node, ModularIndexing):
            base, div, mod = node.args
            bound = upper_bound(base, var_ranges)
            if bound is not None and div.is_Integer and mod.is_Integer:
                if bound <= int(div):
                    return sympy.Integer(0)
                if bound <= int(div) * int(mod):
                    return FloorDiv(base, div)
        if isinstance(node, FloorDiv):
            base, div = node.args
            bound = upper_bound(base, var_ranges)
            if bound is not None and div.is_Integer and bound <= int(div):
                return sympy.Integer(0)
        return node

    return expr.replace(lambda e: isinstance(e, (ModularIndexing, FloorDiv)), fold)


def _merge_digits(expr: Expr) -> Expr:
    """Merge adjacent mixed-radix digits of one base: k*x%a + k*a*(x//a)%b -> k*(x%(a*b))."""
    if not expr.is_Add:
        return expr
    terms = list(expr.args)
    changed = True
    while changed:
        changed = False
        parsed = []
        for term in terms:
            coeff, rest = term.as_coeff_Mul()
            digit = _digits(rest) if coeff.is_Integer else None
            if digit is None and coeff.is_Integer and rest.is_Symbol:
                digit = (rest, sympy.Integer(1), None)
            parsed.append((coeff, digit))
        for a, (coeff_a, dig_a) in enumerate(parsed):
            if dig_a is None or dig_a[2] is None:
                continue
            base, div, mod = dig_a
            for b, (coeff_b, dig_b) in enumerate(parsed):
                if b == a or dig_b is None:
                    continue
                if dig_b[0] == base and dig_b[1] == div * mod and coeff_b == coeff_a * mod:
                    merged_mod = None if dig_b[2] is None else mod * dig_b[2]
                    if merged_mod is None:
                        merged = FloorDiv(base, div)
                    else:
                        merged = ModularIndexing(base, div, merged_mod)
                    terms = [t for k, t in enumerate(terms) if k not in (a, b)]
                    terms.append(coeff_a * merged)
                    changed = True
                    break
            if changed:
                break
    return sympy.Add(*terms)


def simplify_index(expr: Expr, var_ranges: Mapping[sympy.Symbol, Expr] | None = None) -> Expr:
    """Fold integer-division terms using the variables' ranges until nothing changes."""
    var_ranges = var_ranges or {}
    expr = sympy.expand(as_expr(expr))
    for _ in range(8):
        new = _merge_digits(_fold_bounded(expr, var_ranges))
        new = sympy.expand(new)
        if new == expr:
            break
        expr = new
    return expr


def contiguous_strides(size: Sequence[Expr]) -> list[Expr]:
    strides: list[Expr] = []
    running: Expr = sympy.Integer(1)
    for dim in reversed(as_exprs(size)):
        strides.append(running)
        running = running * sympy.Max(dim, 1) if not dim.is_Integer else running * max(int(dim), 1)
    return list(reversed(strides))


def product(values: Sequence[Expr]) -> Expr:
    return functools.reduce(lambda a, b: a * b, values, sympy.Integer(1))


def flat_to_multi(flat: Expr, size: Sequence[Expr]) -> list[Expr]:
    """Row-major unflatten of a flat index into ``size`` (exact, with integer division)."""
    out: list[Expr] = []
    stride = product(size)
    if stride == 0:
        return [sympy.Integer(0)] * len(size)  # an empty tensor: no index is ever read
    for dim in size:
        stride = stride / dim if dim != 0 else stride
        stride = sympy.Integer(int(stride)) if getattr(stride, "is_Integer", False) else stride
        out.append(ModularIndexing(flat, stride, dim) if dim != 1 else sympy.Integer(0))
    return out


def multi_to_flat(index: Sequence[Expr], size: Sequence[Expr]) -> Expr:
    size = as_exprs(size)
    return sympy.Add(*[i * s for i, s in zip(index, contiguous_strides(size), strict=True)])


def static_int(expr: Expr, what: str) -> int:
    """An expression that must be a concrete integer here (e.g. a buffer's element count)."""
    if not getattr(expr, "is_Integer", False):
        raise NotImplementedError(
            f"{what} is symbolic ({expr}); the loop IR supports static sizes only for now"
        )
    return int(expr)


def gcd_all(values: Sequence[int]) -> int:
    return functools.reduce(math.gcd, values, 0)
