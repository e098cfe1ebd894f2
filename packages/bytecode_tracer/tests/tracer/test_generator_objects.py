"""Generator objects of user generator functions called inside the trace: consumed lazily
(their code runs to the next yield when the consumer asks), compared with eager."""

from __future__ import annotations

import sys

import pytest
import torch

from conftest import Compiled, same

x = torch.randn(4)


def _powers(a, n):
    current = a
    for _ in range(n):
        yield current
        current = current * a


def _steps(log, t):
    for i in range(3):
        log.append(("gen", i))
        yield t + i


def test_a_generator_consumed_by_loops_and_builtins_is_one_graph():
    def fn(a):
        total = sum(_powers(a, 3))
        listed = list(_powers(a, 2))
        first = next(_powers(a.cos(), 5))
        return total, listed, first, [p for p in _powers(a, 2)]

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_generators_effects_interleave_with_the_consumers():
    def fn(a):
        log = []
        out = []
        for item in _steps(log, a):
            log.append(("body", len(out)))
            out.append(item.sin())
        return out, log

    compiled = Compiled(fn, fullgraph=True)
    got, want = compiled(x), fn(x)
    assert same(got, want) and got[1] == want[1]
    assert compiled.backend.graph_count == 1


def test_in_place_updates_between_items_are_seen_in_order():
    def counts(t):
        for _ in range(3):
            yield t.clone()

    def fn(a):
        a = a.clone()
        seen = []
        for snap in counts(a):
            seen.append(snap)
            a.add_(1)
        return seen

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))


def test_a_generator_stopped_early_runs_no_more_of_its_code():
    def fn(a):
        log = []
        first = None
        for item in _steps(log, a):
            first = item
            break
        return first, log

    compiled = Compiled(fn, fullgraph=True)
    got, want = compiled(x), fn(x)
    assert same(got, want) and got[1] == [("gen", 0)]


def _guarded(t):
    try:
        yield t
        yield t + 1
    finally:
        pass


def test_a_generator_escaping_or_with_cleanup_breaks_and_matches_eager():
    def returned(a):
        return _powers(a, 2)

    def cleanup(a):
        return next(_guarded(a)) * 2

    compiled = Compiled(returned)
    assert same(list(compiled(x)), list(returned(x)))
    compiled = Compiled(cleanup)
    assert same(compiled(x), cleanup(x))
    assert compiled.breaks  # the yield under try/finally


# ---- user iterator objects whose __iter__ returns themselves ----------------------------
class _Ticker:
    def __init__(self, t, n):
        self.t, self.n, self.seen = t, n, []

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        self.seen.append(self.n)
        return self.t * self.n


def test_an_iterator_object_made_in_the_trace_is_advanced_by_its_next():
    def fn(a):
        ticks = _Ticker(a, 5)
        first = next(ticks)
        out = []
        for item in ticks:
            out.append(item + len(ticks.seen))  # the loop sees each step's state
            if len(out) == 2:
                break
        rest = list(ticks)
        return first, out, rest, ticks.seen, sum(_Ticker(a, 3)), next(ticks, None)

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def _stops_inside(it):
    yield next(it)  # a StopIteration here is a RuntimeError in eager (PEP 479)


def test_stop_iteration_inside_a_generator_is_not_its_end():
    def fn(a):
        try:
            return list(_stops_inside(iter([])))
        except RuntimeError:
            return a + 1

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))


def _both(a, log):
    yield from _powers(a, 2)
    log.append("between")
    yield from [a.sin(), a.cos()]


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="3.12's yield from (SEND) is still a graph break there"
)
def test_yield_from_in_a_generator_stepped_by_its_consumer():
    def fn(a):
        log = []
        out = []
        for item in _both(a, log):
            log.append(len(out))
            out.append(item)
        return out, log

    compiled = Compiled(fn, fullgraph=True)
    got, want = compiled(x), fn(x)
    assert same(got, want) and got[1] == want[1]
