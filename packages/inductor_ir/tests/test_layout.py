"""Layouts: the storage order of symbolic strides is used only where it is proven."""

import sympy
import torch

from ember_inductor_ir.layout import FixedLayout, stride_order

S0 = sympy.Symbol("s0", integer=True, positive=True)
S1 = sympy.Symbol("s1", integer=True, positive=True)


def _layout(size, stride):
    return FixedLayout(torch.device("cpu"), torch.float32, size, stride)


def test_static_strides_order_the_dims():
    assert stride_order(_layout([2, 3, 4], [12, 4, 1])) == [0, 1, 2]
    assert stride_order(_layout([2, 3, 4], [1, 2, 6])) == [2, 1, 0]


def test_symbolic_strides_order_the_dims_when_proven():
    # heads transposed over a symbolic length: (2, 4, s0, 16) stored as (2, s0, 4, 16)
    assert stride_order(_layout([2, 4, S0, 16], [64 * S0, 16, 64, 1])) == [0, 2, 1, 3]
    assert stride_order(_layout([S0, S1, 4], [4, 4 * S0, 1])) == [1, 0, 2]


def test_symbolic_strides_without_a_proven_order_keep_the_logical_order():
    # 4*s1 vs 64: larger only when s1 > 16
    assert stride_order(_layout([S0, S1, 2], [4 * S1, 64, 1])) == [0, 1, 2]
