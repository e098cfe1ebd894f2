"""Sizes the function returns, traced on symbolic sizes (`x.shape[0] * 2`, a ratio, a
comparison): evaluated per call from the inputs' sizes, as Python values (a graph
returning one ran eagerly: "output: symbolic sizes are not supported", fuzz run 2026)."""

from __future__ import annotations

import pytest
import torch
from test_symbolic import Compilers, es, symbolic_graph

from ember_aot_autograd import aot_module
from ember_aot_autograd.errors import UnsupportedOpError
from ember_aot_autograd.outputs import size_output


def _sizes(x, n):
    rows = x.size(0)
    return x.sum(1), rows * 2 + n, x.size(1) / rows, rows >= n


@pytest.mark.parametrize("requires_grad", [False, True])
def test_sizes_returned_follow_each_calls_inputs(requires_grad):
    dims = [{0: es.Dim(), 1: es.Dim()}, "int"]
    example = torch.randn(3, 4, requires_grad=requires_grad)
    gm, _env = symbolic_graph(_sizes, [example, 5], dims)
    fw, bw = Compilers(), Compilers()
    compiled = aot_module(gm, [example, 5], fw, bw)
    for shape, n in (((3, 4), 5), ((5, 2), 7), ((6, 9), 2)):
        x = torch.randn(*shape, requires_grad=requires_grad)
        got, expected = compiled(x, n), _sizes(x, n)
        torch.testing.assert_close(got[0], expected[0])
        for g, e in zip(got[1:], expected[1:], strict=True):
            assert type(g) is type(e) and g == e, (g, e)
        if requires_grad:
            (gx,) = torch.autograd.grad(got[0].sum(), x)
            torch.testing.assert_close(gx, torch.ones_like(x))
    assert len(fw.graphs) == 1  # one symbolic variant for every size
    if not requires_grad:  # the graph returns the tensor only: sizes are computed outside
        (out,) = [n for n in fw.graphs[0].graph.nodes if n.op == "output"]
        assert [isinstance(v.meta["val"], torch.Tensor) for v in out.args[0]] == [True]


def test_a_size_fixed_by_the_trace_is_a_constant():
    def fn(x):
        return x * 2, x.size(1)  # dim 1 static

    gm, _env = symbolic_graph(fn, [torch.randn(3, 4)], [{0: es.Dim()}])
    compiled = aot_module(gm, [torch.randn(3, 4)], Compilers())
    with torch.no_grad():
        for rows in (3, 7):
            x = torch.randn(rows, 4)
            got = compiled(x)
            torch.testing.assert_close(got[0], x * 2)
            assert got[1] == 4 and type(got[1]) is int


def test_a_size_no_input_determines_is_refused():
    # a symbol that is no input's size (as a data-dependent size would be)
    env = es.ShapeEnv()
    x = es.fake_tensor(es.fake_mode(env), torch.randn(3, 4), "x", dims={0: es.Dim()})
    other = env.create_symint(5, "u", dynamic=es.DimDynamic.DYNAMIC)
    assert size_output(x.size(0) * 2, [x]).value([torch.randn(7, 4)]) == 14
    with pytest.raises(UnsupportedOpError, match="data-dependent"):
        size_output(other + x.size(0), [x])
