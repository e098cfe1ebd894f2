"""A compiled function returning a view of its input, recompiled with dynamic sizes after a
size changed: the view is rebuilt for each call's sizes (it crashed replaying a view with
symbolic sizes on a real tensor: "SymIntArrayRef expected to contain only concrete
integers")."""

from __future__ import annotations

import pytest
import torch

import ember


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_output_across_sizes(backend):
    ember.reset()

    def fn(y):
        return [y[1:], y.t()[0], y * 2]

    compiled = ember.compile(fn, backend=backend)
    for shape in ((3, 4), (3, 4), (5, 2), (4, 6), (5, 2)):
        y = torch.randn(*shape)
        got, expected = compiled(y), fn(y)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
        assert got[0].data_ptr() == expected[0].data_ptr()  # a view of y, as in eager
    assert ember.counters[backend]["forward_runs"] == 5
    assert not ember.counters["graph_fallbacks"]
