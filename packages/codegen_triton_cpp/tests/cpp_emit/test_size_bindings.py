"""Sizes of every binding (size_bindings.symbolic): printed as Python over the symbols'
locals, equal only when structurally equal, ordered only where the env proves it."""

from __future__ import annotations

import pytest
import sympy

from ember_codegen.wrapper.held_layouts import extent, is_contiguous
from ember_codegen.wrapper.size_bindings import (
    NeedsConcreteSizes,
    PySize,
    bound,
    concrete,
    python_size,
    symbolic,
    value_of,
)
from ember_inductor_ir.indexing import FloorDiv, ModularIndexing

s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)


class Ranges:
    """The two methods of a ShapeEnv the symbolic binding uses: every symbol >= 2."""

    def simplify(self, expr):
        return expr

    def static_value(self, cond):
        if cond in (sympy.true, sympy.false):  # sympy decided it (positive symbols)
            return bool(cond)
        # increasing in both symbols here: holding at the smallest binding, it always holds
        lhs = sympy.expand(cond.lhs - cond.rhs).subs({s0: 2, s1: 2})
        holds = {">": lhs > 0, ">=": lhs >= 0, "<": lhs < 0, "<=": lhs <= 0}[cond.rel_op]
        return bool(holds) if cond.rel_op in (">", ">=") and holds else None


def test_sizes_print_as_python_over_the_symbols():
    assert python_size(FloorDiv(s0 * s1, 4)) == "((s0*s1) // 4)"
    assert python_size(ModularIndexing(s0, 2, s1)) == "(((s0) // 2) % s1)"
    assert python_size(sympy.Max(s0, s1 + 1)) in ("max(s0, s1 + 1)", "max(s1 + 1, s0)")
    assert eval(python_size(sympy.floor(s0 / 3) * 2 + sympy.Mod(s1, 5)), {"s0": 7, "s1": 12}) == 6


def test_quotients_inside_products_and_ceilings_keep_their_value():
    # `2*(s0) // 2` (= s0) was printed for 2*floor(s0/2): silently wrong buffer sizes
    cases = [
        2 * sympy.floor(s0 / 2),
        sympy.ceiling(s0 / 2),
        -sympy.floor(-s0 / 2),
        3 * sympy.Mod(s0, 4),
        2 * sympy.ceiling(s0 / 4) + FloorDiv(s1, 3) * s0,
        -ModularIndexing(s0, 2, 3) * 5,
    ]
    for expr in cases:
        text = python_size(expr)
        for v0, v1 in ((1, 1), (5, 7), (6, 9), (13, 2), (31, 40)):
            want = int(expr.subs({s0: v0, s1: v1}))
            assert eval(text, {"s0": v0, "s1": v1}) == want, (expr, text, v0, v1)


def test_decisions_hold_for_every_binding_or_raise():
    with symbolic(Ranges()) as sizes:
        a, b = concrete(32 * s0 * s1), concrete(s1 * s0 * 32)
        assert isinstance(a, PySize) and a == b and hash(a) == hash(b)
        assert repr((a, 1)) == "(32*s0*s1, 1)"
        assert concrete(s0 - s0 + 3) == 3 and type(concrete(sympy.Integer(3))) is int
        assert str(value_of("s1")) == "s1"
        assert concrete(s0) != concrete(s1)  # maybe equal for some binding: not known equal
        assert concrete(s0) > 1  # proved by the ranges
        size, stride = (concrete(s0), concrete(s1), 8), (concrete(8 * s1), 8, 1)
        assert is_contiguous(size, stride)
        assert extent((size, stride, 0)) == concrete(8 * s0 * s1)
        with pytest.raises(NeedsConcreteSizes):
            _ = concrete(s0) > concrete(s1)  # true for some bindings only
    assert sizes.used == {"s0", "s1"}


def test_a_comparison_output_is_a_python_bool():
    # a graph's SymBool output (`bool(n)` is `Ne(n, 0)`): Python's operator over the locals,
    # or the binding's bool
    u = sympy.Symbol("u0", integer=True)
    cond = sympy.And(sympy.Ne(u, 0), sympy.Lt(u, s0))
    text = python_size(cond)
    assert eval(text, {"u0": 3, "s0": 5}) is True
    assert eval(text, {"u0": 0, "s0": 5}) is False
    with bound({"u0": 3}):
        assert concrete(sympy.Ne(u, 0)) is True
    with bound({"u0": 0}):
        assert concrete(sympy.Ne(u, 0)) is False
