"""Autograd metadata of tensors read in a trace (`requires_grad`, `grad_fn`, `is_leaf`):
what eager reads at that point of the function, or a graph break, never a stale answer."""

from __future__ import annotations

import torch

from conftest import Compiled, same


def _metadata(t):
    return t.requires_grad, t.grad_fn is None, t.is_leaf


def test_metadata_after_in_place_detach_of_an_intermediate():
    def fn(x):
        h = x.exp()
        before = h.requires_grad, h.is_leaf  # (its grad_fn would be a break)
        h.detach_()
        return h * 3, before, _metadata(h)

    x = torch.randn(5, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_grad_fn_none_of_tensors_without_history():
    def fn(x, w):
        with torch.no_grad():
            y = x * w
        return y + 1, y.grad_fn is None, x.grad_fn is None

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x, w), fn(x, w))


def test_grad_fn_of_an_input_with_history_is_a_break():
    def fn(x):
        y = x.cos()
        return y, x.grad_fn is None

    x = torch.randn(4, requires_grad=True) * 2  # not a leaf: it has a grad_fn
    compiled = Compiled(fn)
    got = compiled(x)
    assert same(got, fn(x)) and got[1] is False
    assert compiled.breaks or not compiled.compiler.records
