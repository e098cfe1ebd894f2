"""A Python int meeting a small NumPy integer dtype (NEP 50: the int is weak, the array's
dtype wins): NumPy raises OverflowError when the int does not fit (`int8_array + 300`), and
compares or clips exactly (`int8_array < 300` is all True). A torch cast of the int would
wrap (300 -> 44 in int8) and give a different value without a word, so the trace never
casts an int that does not fit: a break, and NumPy decides in eager. A symbolic int is
guarded in range. integration_tests/test_numpy_functions_inductor.py runs the default
backend on the same rule."""

# ruff: noqa: E731
from __future__ import annotations

import numpy as np
import pytest

from conftest import Compiled

# 44 is what 300 wraps to in int8, -44 what -300 wraps to: a wrapped compare would be seen
small = lambda: np.array([-44, 0, 3, 44, 127], dtype=np.int8)

RAISING = {
    "add": lambda a: a + 300,
    "reflected_sub": lambda a: 300 - a,
    "mul_below_range": lambda a: a * -129,
    "ufunc_call": lambda a: np.maximum(a, 1000),
    "ufunc_add": lambda a: np.add(a, 256),
    "uint8_minus_one": lambda a: a.astype(np.uint8) + -1,
    "full_fill_value": lambda a: np.full(a.shape, 300, dtype=np.int8) + a,
}

EXACT = {
    "less": lambda a: a < 300,
    "equal": lambda a: a == 300,
    "greater_than_negative": lambda a: a > -300,
    "clip_bound": lambda a: np.clip(a, -300, 300),
}


@pytest.mark.parametrize("name", list(RAISING))
def test_int_out_of_bounds_raises_overflow_error_as_numpy(name):
    fn = RAISING[name]
    with pytest.raises(OverflowError):
        fn(small())
    compiled = Compiled(fn)
    with pytest.raises(OverflowError):
        compiled(small())
    assert compiled.breaks, "a break: NumPy itself raises"


@pytest.mark.parametrize("name", list(EXACT))
def test_int_out_of_bounds_compares_exactly_as_numpy(name):
    fn = EXACT[name]
    expected = fn(small())
    got = Compiled(fn)(small())
    assert got.dtype == expected.dtype and np.array_equal(got, expected), (got, expected)


def test_int_in_bounds_stays_in_the_graph():
    fn = lambda a: (a // 2 + 127, a - -128, a < 127, a.astype(np.uint8) + 255)
    compiled = Compiled(fn, fullgraph=True)
    for got, expected in zip(compiled(small()), fn(small()), strict=True):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert compiled.backend.graph_count == 1


def test_symbolic_int_is_guarded_in_bounds():
    # n symbolic: one graph for values that fit int8; 300 fails the guard, and the retrace
    # leaves the add to NumPy, which raises; values that fit still run the first graph
    fn = lambda a, n: a + n
    compiled = Compiled(fn, dynamic=True)
    for n in (3, -7):
        got = compiled(small(), n)
        assert got.dtype == np.int8 and np.array_equal(got, fn(small(), n))
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    with pytest.raises(OverflowError):
        compiled(small(), 300)
    assert np.array_equal(compiled(small(), 5), fn(small(), 5))
    assert compiled.backend.graph_count == 1
