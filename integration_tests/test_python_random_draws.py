"""Python's `random` draws (`random.random()`, `random.uniform(a, b)`) in compiled code
under every backend (variables/python_random.py): a new draw at each call, the generator
left where eager leaves it, one graph for all calls. The draw reaches the graph as an input
read with `item()`; inductor does not compile that read outside capture_scalar_outputs (the
graph runs eagerly, a declared limitation counted in graph_fallbacks), never a value baked
in."""

from __future__ import annotations

import random

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def scaled(x):
    return (x + 1) * random.uniform(0, 1) - random.random()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_each_call_draws_as_eager(backend):
    x = torch.arange(4.0)
    random.seed(11)
    expected = [scaled(x) for _ in range(3)]
    state_after_eager = random.getstate()
    compiled = ember.compile(scaled, backend=backend, fullgraph=True)
    random.seed(11)
    got = [compiled(x) for _ in range(3)]
    assert random.getstate() == state_after_eager
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert not torch.equal(got[0], got[1])
    assert len(compiled._ember_compiler.records) == 1
