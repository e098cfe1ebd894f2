"""Outputs that are views of inputs, traced on symbolic sizes: the view chain's sizes are
evaluated per call from the inputs (`f(y) = [y[1:]]` over (3, 4) then (5, 2) crashed
replaying `slice(y, [1, 0], [s0, s1])` on a real tensor)."""

from __future__ import annotations

import pytest
import torch
from test_symbolic import Compilers, es, symbolic_graph

from ember_aot_autograd import aot_module


def _views(y):
    return [y[1:], y.reshape(-1)[2:], y.t(), y.view(y.size(0) * y.size(1))]


def test_views_of_an_input_follow_each_calls_sizes():
    from ember_primops import decomposition_table

    gm, _env = symbolic_graph(_views, [torch.randn(3, 4)], [{0: es.Dim(), 1: es.Dim()}])
    fw = Compilers()
    with torch.no_grad():
        compiled = aot_module(gm, [torch.randn(3, 4)], fw, None, decomposition_table())
        for shape in ((3, 4), (5, 2), (2, 7), (3, 4)):
            y = torch.randn(*shape)
            got, expected = compiled(y), _views(y)
            for g, e in zip(got, expected, strict=True):
                torch.testing.assert_close(g, e)
                assert g.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
                assert g.stride() == e.stride() and g.storage_offset() == e.storage_offset()
    assert len(fw.graphs) == 1


@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_view_of_an_input_next_to_a_computed_output(requires_grad):
    def fn(y):
        return y[1:], (y * 2).sum(0)

    gm, _env = symbolic_graph(fn, [torch.randn(3, 4)], [{0: es.Dim()}])
    compiled = aot_module(gm, [torch.randn(3, 4)], Compilers(), Compilers())
    for rows in (3, 6, 4):
        y = torch.randn(rows, 4, requires_grad=requires_grad)
        got, expected = compiled(y), fn(y)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
        if requires_grad:
            (gy,) = torch.autograd.grad(got[0].sum() + got[1].sum(), y)
            (ey,) = torch.autograd.grad(expected[0].sum() + expected[1].sum(), y)
            torch.testing.assert_close(gy, ey)
