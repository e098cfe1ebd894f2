"""A graph calling torch.cond or map compiled around the operator (operator_split.py).

aot_eager and inductor cut the graph at each operator call: the pieces before and after it
and every branch or body are compiled by the backend; at run time the predicate picks the
compiled branch (map loops over its compiled body). Eager is the oracle, values and
gradients; nothing may run as an eager graph fallback.
"""

from __future__ import annotations

import pytest
import torch
from functorch.experimental.control_flow import map as control_map

import ember
from conftest import CountingBackend

BACKENDS = ["aot_eager", "inductor"]


def _assert_compiled(cond_calls=0, map_calls=0):
    assert not ember.counters["graph_fallbacks"]
    compiled = ember.counters["compiled_operators"]
    assert compiled["higher_order.cond"] == cond_calls
    assert compiled["higher_order.map_impl"] == map_calls


def _grads(value, leaves):
    return torch.autograd.grad(value.sum(), leaves, allow_unused=True)


def gated(x, w, v):
    h = (x @ w).relu()  # a piece before the operator

    def inner_true(a, b):
        return a.sin() * v, b + 1

    def inner_false(a, b):
        return a.cos(), b * v

    def outer_true(a):
        return torch.cond(a.mean() > 0.2, inner_true, inner_false, (a, a * 2))

    def outer_false(a):
        return a.exp() - 1, a.tanh()

    first, second = torch.cond(h.sum() > 1.0, outer_true, outer_false, (h,))
    return (first * second + h).sum(1)  # a piece after it


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_cond_values_and_gradients_match_eager(backend):
    counting = CountingBackend(backend)
    compiled = ember.compile(gated, backend=counting, fullgraph=True)
    w = torch.randn(3, 4, requires_grad=True)
    v = torch.randn(4, requires_grad=True)
    for scale in (2.0, -2.0, 0.3, 2.0):  # reaches each branch of both conds
        x = torch.randn(5, 3) * scale
        expected = gated(x, w, v)
        got = compiled(x, w, v)
        torch.testing.assert_close(got, expected)
        for g, e in zip(_grads(got, [w, v]), _grads(expected, [w, v]), strict=True):
            torch.testing.assert_close(g, e) if e is not None else None
    assert counting.graphs == 1
    _assert_compiled(cond_calls=2)  # the outer one, and the inner one in its compiled branch


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_that_does_not_differentiate_leaves_later_pieces_exact(backend):
    w = torch.randn(4, requires_grad=True)

    def scaled(flag, t):
        out = torch.cond(flag, lambda u: u * w, lambda u: torch.ones_like(u), (t,))
        return (out * w).sum()  # read with `w` after the operator, in a later piece

    compiled = ember.compile(scaled, backend=backend, fullgraph=True)
    t = torch.randn(4)
    for flag in (False, True, False, True):  # the non-differentiating branch first
        pred = torch.tensor(flag)
        expected, got = scaled(pred, t), compiled(pred, t)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(_grads(got, [w])[0], _grads(expected, [w])[0])
    _assert_compiled(cond_calls=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_body_compiled_with_gradients(backend):
    def rows(xs, w):
        out = control_map(lambda row, m: (row @ m).tanh(), xs.sin(), w)
        return out.square().sum()

    counting = CountingBackend(backend)
    compiled = ember.compile(rows, backend=counting, fullgraph=True)
    w = torch.randn(3, 2, requires_grad=True)
    xs = torch.randn(6, 3)
    expected, got = rows(xs, w), compiled(xs, w)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(_grads(got, [w])[0], _grads(expected, [w])[0])
    assert counting.graphs == 1
    _assert_compiled(map_calls=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_operator_first_and_last_in_the_graph(backend):
    def pick(flag, t):
        return torch.cond(flag, lambda u: u + 1, lambda u: u * 3, (t,))

    compiled = ember.compile(pick, backend=backend, fullgraph=True)
    t = torch.randn(3)
    with torch.no_grad():
        for flag in (True, False):
            pred = torch.tensor(flag)
            torch.testing.assert_close(compiled(pred, t), pick(pred, t))
    _assert_compiled(cond_calls=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_sizes_stay_one_compile(backend):
    def f(t):
        return torch.cond(t.sum() > 0, lambda u: u.sin() * 2, lambda u: u.cos(), (t * 2,)) + t

    counting = CountingBackend(backend)
    compiled = ember.compile(f, backend=counting, dynamic=True)
    for n in (3, 5, 8):
        for sign in (1.0, -1.0):
            t = torch.rand(n, 2) * sign
            torch.testing.assert_close(compiled(t), f(t))
    assert counting.graphs == 1
    assert not ember.counters["graph_fallbacks"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_across_the_cut_keeps_the_graph_whole(backend):
    def f(flag, x):
        t = x * 2
        out = torch.cond(flag, lambda u: u + 1, lambda u: u - 1, (x,))
        t.add_(out)  # a value of the piece before, written in the piece after
        return t

    compiled = ember.compile(f, backend=backend, fullgraph=True)
    x = torch.randn(3)
    for flag in (True, False):
        pred = torch.tensor(flag)
        torch.testing.assert_close(compiled(pred, x), f(pred, x))
    assert ember.counters["graph_fallbacks"]["higher_order.cond"] == 1
    assert not ember.counters["compiled_operators"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cond_inside_a_no_grad_block_runs_without_grad(backend):
    w = torch.randn(3, requires_grad=True)

    def f(flag, x):
        with torch.no_grad():  # the branch runs without grad: only the last product differentiates
            y = torch.cond(flag, lambda u: u * w, lambda u: u + w, (x,))
        return y * w

    compiled = ember.compile(f, backend=backend)
    x = torch.randn(3)
    for flag in (True, False):
        pred = torch.tensor(flag)
        got, expected = compiled(pred, x), f(pred, x)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(_grads(got, [w])[0], _grads(expected, [w])[0])
    _assert_compiled(cond_calls=1)


@pytest.mark.parametrize("dynamic", [False, True])
def test_dynamos_cond_graph_compiled_by_our_inductor(dynamic):
    # torch.compile as the tracer (the backend convention): with dynamic sizes its bodies
    # carry sizes of its own shape env, compiled per concrete size as its whole graph is
    def f(x, y):
        return torch.cond(x.sum() > 0, lambda a, b: a.sin() * b, lambda a, b: a - b, (x, y)) * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=ember.lookup_backend("inductor"), dynamic=dynamic)
    for n in (3, 5):
        for sign in (1.0, -1.0):
            x, y = torch.rand(n) * sign, torch.randn(n)
            torch.testing.assert_close(compiled(x, y), f(x, y))
    assert not ember.counters["graph_fallbacks"]
    assert ember.counters["compiled_operators"]["higher_order.cond"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cond_inside_an_autocast_block_keeps_the_graph_whole(backend):
    def f(flag, x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.cond(flag, lambda u: u @ w, lambda u: (u * 2) @ w, (x,))
        return y.float() + 1

    compiled = ember.compile(f, backend=backend)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    for flag in (True, False):
        pred = torch.tensor(flag)
        got, expected = compiled(pred, x, w), f(pred, x, w)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
    assert not ember.counters["compiled_operators"]
