"""`MyFunction.apply` is recognised by what it is on every supported torch: a bound Python
classmethod up to 2.13, a builtin method bound to the class from 2.14 (no `__func__`; the
tracer failed to import there and Ember compiled nothing)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.variables.autograd_function import autograd_function_of


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

    @classmethod
    def other(cls, x):
        return x


class OwnApply(Double):
    @classmethod
    def apply(cls, x):  # a subclass's own apply is not Function's
        return x


def test_bound_apply_is_recognised_and_nothing_else():
    assert autograd_function_of(Double.apply) is Double
    assert autograd_function_of(Double.other) is None  # another classmethod bound to it
    assert autograd_function_of(Double.forward) is None
    assert autograd_function_of(OwnApply.apply) is None
    assert autograd_function_of(len) is None


def test_apply_is_traced_into_one_graph():
    compiled = Compiled(lambda x: Double.apply(x).sin(), fullgraph=True)
    x = torch.randn(4, requires_grad=True)
    out = compiled(x)
    assert same(out, Double.apply(x).sin())
    assert compiled.backend.graph_count == 1


class ScaleBySaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # not the forward's derivative: the custom rule must be kept


def test_apply_through_an_instance_made_in_the_trace():
    # `Fn().apply(x)`: deprecated in eager (a warning) yet common in older code
    def fn(x):
        return ScaleBySaved().apply(x).cos()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        out = compiled(x)
    with pytest.warns(DeprecationWarning):
        expected = fn(x_ref)
    assert same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert same(x.grad, x_ref.grad)
    assert compiled.backend.graph_count == 1
