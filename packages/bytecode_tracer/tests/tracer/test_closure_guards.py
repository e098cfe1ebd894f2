"""A closure handed to a compiled frame is guarded by its code, globals, defaults' shape and
the cell contents the trace reads (variables/functions.py), not by its identity: a fresh
closure of the same code runs the same compiled code. Its identity is pinned only where the
trace uses the function object itself. packages/ember/tests/test_closure_recompiles.py
runs the same under inductor."""

from __future__ import annotations

import torch

import ember_frame_hook as fh
from conftest import Compiled, same

x = torch.randn(3)


def around(fn):
    def wrapper(a):
        return fn(a) * 2

    return wrapper


def decorated_closure(k):
    @around
    def shifted(a):
        return a + k

    return shifted


def call(f, a):
    return f(a).cos()


def test_fresh_decorated_closures_share_compiled_code():
    compiled = Compiled(call, dynamic=False)
    for _ in range(2):
        for k in (1.5, 2.5):
            fn = decorated_closure(k)
            assert same(compiled(fn, x), call(fn, x))
    assert compiled.backend.graph_count == 2  # one per float value, not per function
    assert len(fh.cache_entries(call.__code__)) == 2


def test_fresh_closures_over_tensors_compile_once():
    compiled = Compiled(call)
    for _ in range(4):
        fn = decorated_closure(torch.randn(3))
        assert same(compiled(fn, x), call(fn, x))
    assert compiled.backend.graph_count == 1


def test_identity_use_pins_the_function():
    def pick(f, g, a):
        return a + 1 if f is g else a - 1

    compiled = Compiled(pick)
    one, two = decorated_closure(1.0), decorated_closure(1.0)
    for f, g in ((one, one), (two, one), (one, two), (two, two)):
        assert same(compiled(f, g, x), pick(f, g, x))


def test_a_cell_written_in_the_trace_is_the_callers_cell():
    def counter():
        count = 0

        def bump(a):
            nonlocal count
            count += 1
            return a * count

        return bump, lambda: count

    def use(f, a):
        return f(a) + f(a)

    compiled = Compiled(use)
    for _ in range(3):
        bump, read = counter()
        eager_bump, eager_read = counter()
        assert same(compiled(bump, x), use(eager_bump, x))
        assert read() == eager_read() == 2
