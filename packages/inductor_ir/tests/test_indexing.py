"""Index simplification folds reshapes back to plain indices."""

import sympy

from ember_inductor_ir.indexing import (
    FloorDiv,
    ModularIndexing,
    flat_to_multi,
    index_vars,
    multi_to_flat,
    simplify_index,
)


def test_flatten_then_unflatten_folds():
    (x,) = index_vars("i", 1)
    parts = flat_to_multi(x, [sympy.Integer(4), sympy.Integer(6)])
    assert simplify_index(multi_to_flat(parts, [4, 6]), {x: sympy.Integer(24)}) == x


def test_bounded_digits_fold():
    i0, i1 = index_vars("i", 2)
    ranges = {i0: sympy.Integer(3), i1: sympy.Integer(5)}
    assert simplify_index(ModularIndexing(i1, 1, 5), ranges) == i1
    assert simplify_index(FloorDiv(5 * i0 + i1, 5), ranges) == i0


def test_unflatten_into_an_empty_shape():
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    assert flat_to_multi(x, [sympy.Integer(5), sympy.Integer(0), sympy.Integer(3)]) == [0, 0, 0]
    assert ModularIndexing(x + 4, sympy.Integer(0), sympy.Integer(3)).args[0] == x + 4


def test_digits_and_floors_keep_non_negative_operands():
    # C++ prints these with truncating / and %: a simplification may not make them negative.
    i0, i1 = index_vars("i", 2)
    two = sympy.Integer(2)
    digit = ModularIndexing(2 * i0 + i1 - 3, sympy.Integer(1), two)
    assert digit == ModularIndexing(i1 + 1, sympy.Integer(1), two)
    assert FloorDiv(2 * i0 + i1 - 3, two) == i0 - 2 + FloorDiv(i1 + 1, two)
    # A negative coefficient could still go negative: left as it is.
    kept = ModularIndexing(4 * i0 + 5 - i1, sympy.Integer(1), two)
    assert kept.args[0] == 4 * i0 + 5 - i1
