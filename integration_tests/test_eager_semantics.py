"""Results that once differed from eager under the aot backends (issue 26): each compiled
under `aot_eager` and `inductor`, compared with eager, and checked to have run compiled."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("fresh_ember")


def _ran_compiled(backend: str) -> None:
    assert ember.counters[backend]["forward_runs"] >= 1, dict(ember.counters[backend])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "view",
    [
        lambda x: x.t()[::2, ::2],  # not dense: eager keeps the stride order, packed
        lambda x: x[:, 1:5],  # not dense, row-major order
        lambda x: x.t(),  # dense: eager keeps the strides themselves
        lambda x: x[:1].t()[::3],  # size-1 dim
        lambda x: x[:, :1].expand(6, 3).t(),  # a zero stride
    ],
    ids=["transposed_steps", "narrowed", "transposed", "size_one", "expanded"],
)
def test_clone_and_conversion_keep_eagers_strides(backend, view):
    def f(x):
        v = view(x)
        return v.clone(), v.to(torch.float64)

    x = torch.randn(6, 8)
    expected = f(x)
    got = ember.compile(f, backend=backend)(x)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride(), (g.stride(), e.stride())
    _ran_compiled(backend)
