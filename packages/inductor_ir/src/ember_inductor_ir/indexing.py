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


def is_indirect(symbol: sympy.Symbol) -> bool:
    """Whether an index symbol stands for a loaded value (ops.indirect_indexing's symbols,
    named ``indirect*`` by every handler), not a loop variable or a size."""
    return symbol.name.startswith("indirect")


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
        if isinstance(base, ModularIndexing) and _divides(divisor, base.args[2]):
            # ((b // d) % m) // k with k | m: the digit (b // (d*k)) % (m / k)
            inner, div, mod = base.args
            return ModularIndexing(inner, div * divisor, sympy.Integer(int(mod) // int(divisor)))
        if base.is_Add and (divisor.is_Integer or divisor.is_positive):
            # Terms that are whole multiples of the divisor (a size symbol's too: 64*i*s
            # over 64*s) leave the floor.
            outside, inside = [], []
            for term in base.args:
                quotient = _whole_quotient(term, divisor)
                if quotient is None:
                    inside.append(term)
                else:
                    outside.append(quotient)
            if outside:
                # The constant's multiples of the divisor leave too: what stays inside must
                # remain non-negative (C++ divides truncating), else do not simplify.
                rest, shift = _split_constant(sympy.Add(*inside), divisor)
                if rest.is_nonnegative:
                    return sympy.Add(*outside) + shift + FloorDiv(rest, divisor)
        return None


def _whole_quotient(term: Expr, divisor: Expr) -> Expr | None:
    """term / divisor when it is a polynomial with integer coefficients (for every value of
    the size symbols), else None."""
    if divisor.is_Integer:
        coeff, rest = term.as_coeff_Mul()
        if coeff.is_Integer and int(divisor) != 0 and int(coeff) % int(divisor) == 0:
            return sympy.Integer(int(coeff) // int(divisor)) * rest
        return None
    quotient = term / divisor
    numer, denom = quotient.as_numer_denom()
    if denom != 1 or not all(c.is_Integer for c in _coefficients(numer)):
        return None
    return quotient


def _divides(factor: Expr, multiple: Expr) -> bool:
    """Whether the integer ``factor`` divides the integer ``multiple`` (both known)."""
    return (
        factor.is_Integer and multiple.is_Integer and int(factor) > 0
        and int(multiple) % int(factor) == 0
    )  # fmt: skip


def _coefficients(expr: Expr) -> list[Expr]:
    return [term.as_coeff_Mul()[0] for term in sympy.Add.make_args(sympy.expand(expr))]


def _split_constant(expr: Expr, period: Expr) -> tuple[Expr, int]:
    """(expr - k*period, k) with the constant term of the first reduced into [0, period)."""
    if not period.is_Integer:
        return expr, 0
    constant, _ = expr.as_coeff_Add()
    k = int(constant) // int(period) if constant.is_Integer else 0
    return expr - k * int(period), k


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
        # one digit of one base, whatever the loop variables were flattened into:
        # ((b // d) // k) % m is (b // (d*k)) % m; ((b // d) % n // k) % m with k*m | n too
        if isinstance(base, FloorDiv):
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        if isinstance(base, ModularIndexing) and _divides(divisor * modulus, base.args[2]):
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        if base.is_Add:
            # Terms that are multiples of divisor*modulus do not change the digit (a symbolic
            # period too: 128*i*s under a digit of period 128*s).
            period = divisor * modulus
            if period == 0 or not (period.is_Integer or period.is_positive):
                return None  # a digit of an empty range: nothing to simplify
            kept = [t for t in base.args if _whole_quotient(t, period) is None]
            if len(kept) != len(base.args):
                # Keep the base non-negative (C++'s % truncates): shift the constant into
                # [0, period), and give up if the rest could still go negative.
                rest, _ = _split_constant(sympy.Add(*kept), period)
                if rest.is_nonnegative:
                    return ModularIndexing(rest, divisor, modulus)
        return None


def upper_bound(expr: Expr, var_ranges: Mapping[sympy.Symbol, Expr]) -> Expr | None:
    """An exclusive upper bound of a non-negative index expression, if one is known: an
    integer, or an expression over the size symbols when the loops' ranges are symbolic
    (a size symbol ``s`` not among the loop variables is bounded by ``s + 1``)."""
    if expr.is_Integer:
        return expr + 1
    if isinstance(expr, sympy.Symbol):
        bound = var_ranges.get(expr)
        if bound is not None:
            return sympy.sympify(bound)
        return expr + 1 if expr.is_nonnegative else None
    if isinstance(expr, ModularIndexing):
        modulus = expr.args[2]
        return modulus if modulus.is_Integer or modulus.is_positive else None
    if isinstance(expr, FloorDiv):
        inner = upper_bound(expr.args[0], var_ranges)
        divisor = expr.args[1]
        if inner is None:
            return None
        if divisor.is_Integer and inner.is_Integer:
            return sympy.Integer((int(inner) - 1) // int(divisor) + 1)
        return inner if divisor.is_positive else None  # x // d <= x for d >= 1
    if expr.is_Add:
        bounds = [upper_bound(term, var_ranges) for term in expr.args]
        if any(b is None for b in bounds):
            return None
        return sympy.expand(sympy.Add(*[b - 1 for b in bounds]) + 1)
    if expr.is_Pow:
        base, exp = expr.args
        bound = upper_bound(base, var_ranges)
        if bound is None or not (exp.is_Integer and int(exp) > 0):
            return None
        return sympy.expand((bound - 1) ** exp + 1)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if not (coeff.is_Integer and int(coeff) >= 0):
            return None
        largest = sympy.Integer(coeff)
        for factor in sympy.Mul.make_args(rest):  # non-negative factors (sizes, indices)
            bound = upper_bound(factor, var_ranges)
            if bound is None:
                return None
            largest = largest * (bound - 1)
        return sympy.expand(largest + 1)
    return None


def known_le(a: Expr, b: Expr) -> bool:
    """Whether a <= b is proven for every value of the symbols: b - a, with each positive
    integer symbol written as ``1 + t`` (t >= 0), expands to a sum of non-negative terms
    (non-negative coefficients times non-negative symbols)."""
    diff = sympy.expand(sympy.sympify(b) - sympy.sympify(a))
    if diff.is_Integer:
        return int(diff) >= 0
    shifted = {
        s: s + 1 for s in diff.free_symbols if s.is_positive and s.is_integer
    }  # s + 1 with s >= 0 stands for a symbol >= 1: the same expression in a shifted symbol
    if shifted:
        diff = sympy.expand(diff.xreplace(shifted))
    for term in sympy.Add.make_args(diff):
        coeff, rest = term.as_coeff_Mul()
        if not (coeff.is_Rational and coeff >= 0 and (rest == 1 or _nonneg_product(rest))):
            return False
    return True


def _nonneg_product(expr: Expr) -> bool:
    """A product of symbols (and digits) that are each non-negative."""
    return all(
        f.is_nonnegative or (f.is_Pow and f.args[0].is_nonnegative)
        for f in sympy.Mul.make_args(expr)
    )


def _digits(expr: Expr) -> tuple[Expr, Expr, Expr | None] | None:
    """View FloorDiv / ModularIndexing / a bare term as digit (base, divisor, modulus|None)."""
    if isinstance(expr, ModularIndexing):
        return expr.args[0], expr.args[1], expr.args[2]
    if isinstance(expr, FloorDiv):
        return expr.args[0], expr.args[1], None
    return None


def _fold_bounded(expr: Expr, var_ranges: Mapping[sympy.Symbol, Expr]) -> Expr:
    """Drop digits that are provably whole: x % m with x < m is x, x // d with x < d is 0.
    The bounds may be symbolic (loops to a size symbol): the fold is proven for every size."""

    def fold(node: Expr) -> Expr:
        if isinstance(node, ModularIndexing):
            base, div, mod = node.args
            bound = upper_bound(base, var_ranges)
            if bound is not None:
                if known_le(bound, div):
                    return sympy.Integer(0)
                if known_le(bound, div * mod):
                    return FloorDiv(base, div)
            common = _common_factor(base, div, var_ranges)
            if common is not None:
                return ModularIndexing(common[0], common[1], mod)
        if isinstance(node, FloorDiv):
            base, div = node.args
            bound = upper_bound(base, var_ranges)
            if bound is not None and known_le(bound, div):
                return sympy.Integer(0)
            common = _common_factor(base, div, var_ranges)
            if common is not None:
                return FloorDiv(*common)
        return node

    return expr.replace(lambda e: isinstance(e, (ModularIndexing, FloorDiv)), fold)


def _parse_digit(term: Expr) -> tuple[Expr, tuple[Expr, Expr, Expr | None]] | None:
    """A term as (coefficient, digit): ``k * digit`` where the coefficient may be a product
    of size symbols (``256*s0*(x // (256*s0))``), or ``k * x`` for a symbol x (x // 1)."""
    coeff, rest = term.as_coeff_Mul()
    if not coeff.is_Integer:
        return None
    if rest.is_Symbol:
        return coeff, (rest, sympy.Integer(1), None)
    factors = sympy.Mul.make_args(rest)
    digits = [f for f in factors if isinstance(f, (FloorDiv, ModularIndexing))]
    if len(digits) != 1:
        return None
    digit = _digits(digits[0])
    assert digit is not None
    return term / digits[0], digit


def _common_factor(
    base: Expr, divisor: Expr, var_ranges: Mapping[sympy.Symbol, Expr]
) -> tuple[Expr, Expr] | None:
    """(k, m) with (g*k + r) // (g*m) == k // m: a factor g of the divisor that divides
    every term of the base but a remainder r proven in [0, g) ("(16*s*i + 16*j + l) //
    (32*s)" with 16*j + l < 16*s is i // 2: GQA's shared heads over a symbolic length)."""
    terms = sympy.Add.make_args(base)
    candidates = set()
    for term in terms:
        try:
            g = sympy.gcd(term, divisor)
        except (sympy.PolynomialError, TypeError, ValueError):
            continue
        if g != 1 and g.is_positive:
            candidates.add(g)
    for g in sorted(candidates, key=sympy.default_sort_key):
        if _whole_quotient(divisor, g) is None:
            continue
        whole, rest = [], []
        for term in terms:
            quotient = _whole_quotient(term, g)
            (rest if quotient is None else whole).append(term if quotient is None else quotient)
        remainder = sympy.Add(*rest)
        if not whole or not rest or not remainder.is_nonnegative:
            continue
        bound = upper_bound(remainder, var_ranges)
        if bound is not None and known_le(bound, g):
            return sympy.Add(*whole), _whole_quotient(divisor, g)
    return None


def _merge_digits(expr: Expr) -> Expr:
    """Merge adjacent mixed-radix digits of one base: k*x%a + k*a*(x//a)%b -> k*(x%(a*b)).
    The radices and coefficients may be symbolic (a loop over ``2*s0`` rows)."""
    if not expr.is_Add:
        return expr
    terms = list(expr.args)
    changed = True
    while changed:
        changed = False
        parsed = [_parse_digit(term) for term in terms]
        for a, found_a in enumerate(parsed):
            if found_a is None or found_a[1][2] is None:
                continue
            coeff_a, (base, div, mod) = found_a
            for b, found_b in enumerate(parsed):
                if b == a or found_b is None:
                    continue
                coeff_b, dig_b = found_b
                if (
                    dig_b[0] == base
                    and sympy.expand(dig_b[1] - div * mod) == 0
                    and sympy.expand(coeff_b - coeff_a * mod) == 0
                ):
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
    """Fold integer-division terms using the variables' ranges until nothing changes.

    A pure function of the expression and the ranges (sympy values compare and hash by
    structure): memoized, since lowering, scheduling, the dump and code generation each
    simplify the same few thousand indices again."""
    return _simplify_index(as_expr(expr), tuple(var_ranges.items()) if var_ranges else ())


@functools.lru_cache(maxsize=16384)
def _simplify_index(expr: Expr, ranges: tuple[tuple[sympy.Symbol, Expr], ...]) -> Expr:
    var_ranges = dict(ranges)
    expr = sympy.expand(expr)
    for _ in range(8):
        new = _fold_bounded(expr, var_ranges)
        # digits merge inside digits' bases too (a reshape of a reshape)
        new = new.replace(lambda e: e.is_Add, _merge_digits)
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
