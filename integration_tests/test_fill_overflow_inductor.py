"""A number stored into a tensor's dtype (a fill value, a pad value, a clamp bound) that the
dtype cannot hold, under the default backend: eager's kernels refuse it (RuntimeError: value
cannot be converted ... without overflow), where inductor's generated code would wrap it
(300 -> 44 in int8) and return a different tensor. The twin of the STORED cases of
packages/bytecode_tracer/tests/tracer/test_eager_checks.py."""

from __future__ import annotations

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def filled(t, v):
    return torch.full((2,), v, dtype=t.dtype) + t.masked_fill(t > 1, v)[:2]


def test_overflowing_fill_value_raises_under_inductor():
    t = torch.arange(3, dtype=torch.int8)
    compiled = ember.compile(filled, backend="inductor", dynamic=True)
    assert torch.equal(compiled(t, 100), filled(t, 100))
    assert torch.equal(compiled(t, -5), filled(t, -5))  # a symbolic fill: the same graph
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
    with pytest.raises(RuntimeError, match="overflow"):
        filled(t, 300)
    with pytest.raises(RuntimeError, match="overflow"):
        compiled(t, 300)
    assert torch.equal(compiled(t, 7), filled(t, 7))


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: torch.full_like(t, 300),
        lambda t: torch.nn.functional.pad(t, (1, 1), value=-129),
        lambda t: torch.where(t > 0, t, 300),
        lambda t: t.clamp(max=300),
        lambda t: torch.full((2,), 1e6, dtype=torch.float16) + t[:2],
    ],
    ids=["full_like", "pad", "where", "clamp", "float16_full"],
)
def test_constant_that_overflows_raises_under_inductor(fn):
    t = torch.arange(3, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="overflow"):
        fn(t)
    with pytest.raises(RuntimeError, match="overflow"):
        ember.compile(fn, backend="inductor")(t)
