"""A graph whose inputs share storage, one of them written (a view and its base passed on
across a graph break, as the tracer fuzzer's seed 1:110 made): compiled, the write is seen
through the other input as in eager. Where the stages cannot replay it (neither input
covers the other) the graph runs eagerly, counted; never an error."""

from __future__ import annotations

import io

import pytest
import torch

import ember

OUT = io.StringIO()

BACKENDS = ["aot_eager", "inductor"]


def _across_a_break(x, w):
    t = x[:, 0]
    s = w.amax()
    print("a graph break", file=OUT)  # the next graph gets t and x as inputs (t first)
    t.add_(x @ w)
    return x.sum() + s


def _overlapping(a, b):
    a.add_(1)
    return b * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_through_a_view_input_reaches_its_base(backend):
    ember.reset()
    x, w = torch.randn(3, 4), torch.randn(4)
    xe = x.clone()
    expected = _across_a_break(xe, w)
    got = ember.compile(_across_a_break, backend=backend)(x, w)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, xe)
    assert ember.counters[backend]["forward_runs"] >= 2  # both sides of the break compiled
    assert not ember.counters["graph_fallbacks"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_neither_covering_the_other_run_eagerly(backend):
    ember.reset()
    base, eager_base = torch.arange(6.0), torch.arange(6.0)
    expected = _overlapping(eager_base[0:4], eager_base[2:6])
    got = ember.compile(_overlapping, backend=backend)(base[0:4], base[2:6])
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(base, eager_base)
    assert ember.counters["graph_fallbacks"]["aliased_input_write"] == 1


def _add_own_row(x):
    with torch.no_grad():
        x.add_(x[0])  # fuzz 1:205: eager refuses the partial overlap
    return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_reading_its_own_memory_raises_eagers_error(backend):
    ember.reset()
    with pytest.raises(RuntimeError) as expected:
        _add_own_row(torch.ones(3, 4))
    with pytest.raises(RuntimeError) as got:
        ember.compile(_add_own_row, backend=backend)(torch.ones(3, 4))
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)
    assert ember.counters["graph_fallbacks"]["aten.add_.Tensor"] == 1
