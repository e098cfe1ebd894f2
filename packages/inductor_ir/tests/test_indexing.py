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
