"""Fixtures of the C++ emission tests (helpers live in prim_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prim_helpers import assert_matches, compile_fn


@pytest.fixture
def compile_prims(builder):
    """compile_prims(fn, *inputs) -> (schedule, compiled), without running it."""
    return lambda fn, *inputs: compile_fn(fn, *inputs, builder=builder)


@pytest.fixture
def check(builder):
    """check(fn, *inputs, atol=None, rtol=None) -> (schedule, compiled): compiles ``fn``
    through the C++ target, runs it twice (buffers are reused between calls) and compares
    every output with eager (values, dtype, shape, strides)."""

    def run(fn: Callable, *inputs: Any, atol: float | None = None, rtol: float | None = None):
        expected = fn(*inputs)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        sched, compiled = compile_fn(fn, *inputs, builder=builder)
        for _ in range(2):
            assert_matches(compiled(list(inputs)), expected, atol, rtol)
        return sched, compiled

    return run
