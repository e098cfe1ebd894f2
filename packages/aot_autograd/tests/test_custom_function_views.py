"""An output that is its input (or a view of it) as a user's autograd.Function returned
it: eager gives it the user's backward, so it must not be rebuilt from the real input as
a plain view (whose gradient is the view's own, silently not the user's)."""

from __future__ import annotations

import torch

from conftest import CountingCompiler, check_against_eager
from ember_aot_autograd import aot_function


class ReverseGrad(torch.autograd.Function):
    """Returns its input as it is; backward flips and scales the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * -3


class Unchanged(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 5


def test_input_returned_by_a_function_keeps_its_backward():
    check_against_eager(lambda x: Unchanged.apply(x), [torch.randn(3, 4, requires_grad=True)])


def test_view_returned_by_a_function_keeps_its_backward():
    check_against_eager(lambda x: ReverseGrad.apply(x), [torch.randn(3, 4, requires_grad=True)])


def test_view_of_a_functions_output_keeps_its_backward():
    def fn(x, y):
        return ReverseGrad.apply(x).t(), y * 2

    inputs = [torch.randn(3, 4, requires_grad=True), torch.randn(2, requires_grad=True)]
    check_against_eager(fn, inputs)


def test_output_still_shares_the_inputs_storage():
    compiled = aot_function(lambda x: ReverseGrad.apply(x), CountingCompiler())
    x = torch.randn(5, requires_grad=True)
    out = compiled(x)
    assert out.data_ptr() == x.data_ptr()
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((5,), -3.0))


def test_plain_views_are_still_rebuilt_from_the_input():
    compiled = aot_function(lambda x: x.view(-1), CountingCompiler())
    x = torch.randn(2, 3, requires_grad=True)
    assert compiled(x)._base is x
