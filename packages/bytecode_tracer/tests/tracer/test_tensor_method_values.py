"""Unbound C methods of torch.Tensor handed around as values (op = torch.Tensor.__radd__)."""

from __future__ import annotations

import torch

from conftest import Compiled, same

OPS = {
    "radd": torch.Tensor.__radd__,
    "cfloat": torch.Tensor.cfloat,
    "getitem": torch.Tensor.__getitem__,
}


def test_unbound_tensor_methods_called_with_the_tensor_first():
    def fn(x):
        return OPS["radd"](x, 2), OPS["cfloat"](x), OPS["getitem"](x, (0, slice(1, None)))

    x = torch.randn(3, 4)
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(x)
    assert all(same(g, e) for g, e in zip(got, fn(x), strict=True))
    assert compiled.backend.graph_count == 1
    assert compiled.backend.op_count == 3


def test_in_place_unbound_method():
    def fn(x):
        torch.Tensor.add_(x, 1)
        return x * 2

    x = torch.randn(3)
    expected = fn(x.clone())
    compiled = Compiled(fn, fullgraph=True)
    y = x.clone()
    assert same(compiled(y), expected) and same(y, x + 1)
