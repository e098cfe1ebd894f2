"""Writes to closure cells that live outside the trace (`nonlocal` in a function the trace
calls, or in the compiled frame itself): after the call the cell holds what eager leaves
there, later reads in the same trace see the write, and a cell reached two ways is one."""

from __future__ import annotations

import torch

from conftest import Compiled, same


def _counter_pair():
    """A fresh (eager, compiled) pair of closures over a float and a tensor cell."""

    def make():
        count = 0.25
        total = torch.zeros(3)

        def outer(x):
            return middle(x)

        def middle(x):
            def bump(x):
                nonlocal count, total
                count += 1
                total = total + x
                return count * x + total

            return bump(x), count

        def state():
            return count, total

        return outer, state

    return make(), make()


def test_nonlocal_write_two_levels_below_the_compiled_frame():
    (eager_fn, eager_state), (fn, state) = _counter_pair()
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for _ in range(3):
        assert same(compiled(x), eager_fn(x))
        assert same(state(), eager_state())
    assert compiled.backend.graph_count >= 1 and not compiled.breaks


def _real_closure_pair():
    def make():
        seen = []
        scale = 1.0

        def record(y):
            nonlocal scale
            scale = scale * 2
            seen.append(scale)
            return y * scale

        def fn(x):
            a = record(x)
            b = record(a)  # reads the write of the first call
            return a + b

        return fn, lambda: (scale, list(seen))

    return make(), make()


def test_nonlocal_write_in_a_real_closure_the_trace_inlines():
    (eager_fn, eager_state), (fn, state) = _real_closure_pair()
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    for _ in range(2):
        assert same(compiled(x), eager_fn(x))
        assert same(state(), eager_state())
    assert not compiled.breaks


def test_compiled_frame_writes_its_own_free_variable_then_breaks():
    def make():
        hits = 0

        def fn(x):
            nonlocal hits
            hits += 1
            y = x.sin()
            print(end="")  # a graph break
            return y * hits

        return fn, lambda: hits

    (eager_fn, eager_hits), (fn, hits) = make(), make()
    compiled = Compiled(fn)
    x = torch.randn(2)
    for _ in range(3):
        assert same(compiled(x), eager_fn(x))
        assert hits() == eager_hits()
    assert compiled.backend.graph_count >= 1 and compiled.breaks


def test_cell_shared_by_the_compiled_frame_and_a_callee_is_not_split():
    def make():
        level = 1

        def lift():
            nonlocal level
            level += 10

        def fn(x):
            nonlocal level
            level += 1
            lift()
            return x * level

        return fn, lambda: level

    (eager_fn, eager_level), (fn, level) = make(), make()
    compiled = Compiled(fn)
    x = torch.randn(3)
    for _ in range(2):
        assert same(compiled(x), eager_fn(x))
        assert level() == eager_level()


def test_callee_over_the_compiled_frames_own_cell_is_not_read_stale():
    """A function handed in that closes over the compiled frame's own free variable: the
    frame reads that variable as a symbolic local, so the callee's write must not be
    traced against a separate copy (it breaks, and the result is eager's)."""

    def make():
        count = 1

        def bump():
            nonlocal count
            count += 1

        def fn(x, step):
            step()
            return x * count

        return fn, bump, lambda: count

    (eager_fn, eager_bump, eager_count), (fn, bump, count) = make(), make()
    compiled = Compiled(fn)
    x = torch.randn(3)
    for _ in range(2):
        assert same(compiled(x, bump), eager_fn(x, eager_bump))
        assert count() == eager_count()
