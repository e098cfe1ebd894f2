"""`random.random()` / `random.uniform(a, b)` of Python's `random` module in compiled code
(variables/python_random.py): each call draws anew and advances the module's generator as
eager does, never a value baked into the graph; the generator ends where eager leaves it."""

from __future__ import annotations

import random

import pytest
import torch

from conftest import Compiled, same


def _eager_and_compiled(fn, *args, seed=5, calls=3, **kw):
    """(eager results, compiled results, compiled, whether the generator ended the same)."""
    random.seed(seed)
    expected = [fn(*args) for _ in range(calls)]
    after_eager = random.getstate()
    compiled = Compiled(fn, **kw)
    random.seed(seed)
    got = [compiled(*args) for _ in range(calls)]
    return expected, got, compiled, random.getstate() == after_eager


def test_a_float_draw_is_made_on_each_call():
    def fn(x):
        return (x + 1) * random.uniform(0, 1)

    expected, got, compiled, state_same = _eager_and_compiled(fn, torch.ones(3), fullgraph=True)
    assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True)) and state_same
    assert not torch.equal(got[0], got[1])
    assert compiled.backend.graph_count == 1  # one graph for every call, no recompiles
    assert compiled.backend.ops() == ["add", "item", "mul"]


def test_draws_keep_their_order_and_exact_value():
    def fn(x):
        a = random.random()
        b = random.uniform(-2.0, 5.0)
        return x.double() * a - b, a, b

    expected, got, _, state_same = _eager_and_compiled(fn, torch.arange(3.0), fullgraph=True)
    assert state_same
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g[0], e[0]) and g[1:] == e[1:] and type(g[1]) is float


def test_a_branch_on_a_draw_breaks_and_stays_right():
    def fn(x):
        r = random.random()
        if r < 0.5:
            return x + 1, r
        return x - 1, r

    expected, got, compiled, state_same = _eager_and_compiled(fn, torch.zeros(2), calls=8)
    assert all(same(g, e) for g, e in zip(got, expected, strict=True)) and state_same
    assert compiled.breaks


def test_a_draw_next_to_other_random_calls_keeps_eager_order():
    def fn(x):
        a = random.random()
        y = x + a
        n = random.randint(1, 9)  # not drawn by the graph: Python runs it after a break
        return y * random.uniform(0, 1) + n

    expected, got, _, state_same = _eager_and_compiled(fn, torch.ones(2))
    assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True)) and state_same


def test_a_draw_of_another_generator_is_not_taken_for_the_modules():
    mine = random.Random(3)

    def fn(x):
        return x * mine.random()

    x = torch.ones(2)
    expected = fn(x)
    mine.seed(3)
    got = Compiled(fn)(x)
    assert torch.equal(got, expected)


def test_a_draw_that_raises_raises_as_eager():
    def fn(x):
        return x * random.uniform(0)

    with pytest.raises(TypeError):
        Compiled(fn)(torch.ones(2))
