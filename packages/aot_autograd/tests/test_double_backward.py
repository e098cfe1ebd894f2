"""A backward under create_graph=True through compiled graphs: gradients with eager's
history (second derivatives equal to eager's), or, where an eager recomputation would differ
from the forward that ran, gradients whose differentiation raises, naming why."""

from __future__ import annotations

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import aot_function, aot_module


def _penalty(x, w):
    return (torch.sin(x @ w) * x.sum()).relu()


def test_second_derivatives_equal_eagers(partition_fn):
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    compiled = aot_function(_penalty, CountingCompiler(), partition_fn=partition_fn)

    def gradient_norm(fn):
        gx, gw = torch.autograd.grad(fn(x, w).sum(), [x, w], create_graph=True)
        return gx.square().sum() + gw.square().sum()

    got, expected = gradient_norm(compiled), gradient_norm(_penalty)
    torch.testing.assert_close(got, expected)
    assert got.requires_grad and expected.requires_grad
    torch.testing.assert_close(
        torch.autograd.grad(got, [x, w]), torch.autograd.grad(expected, [x, w])
    )


def test_module_parameters_get_second_derivatives():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    x = torch.randn(6, 3, requires_grad=True)
    compiled = aot_module(model, [x], CountingCompiler())

    def penalty(fn):  # a WGAN-GP style gradient penalty, differentiated w.r.t. the weights
        (gx,) = torch.autograd.grad(fn(x).sum(), [x], create_graph=True)
        return (gx.norm(dim=1) - 1).square().mean()

    got, expected = penalty(compiled), penalty(model)
    torch.testing.assert_close(got, expected)
    weights = list(model.parameters())
    # the last bias does not reach the penalty: None in both
    second = torch.autograd.grad(got, weights, allow_unused=True)
    torch.testing.assert_close(second, torch.autograd.grad(expected, weights, allow_unused=True))
    assert second[-1] is None


def test_a_grad_that_needs_no_history_has_none():
    """d/dx (3x).sum() is a constant: eager's gradient does not require grad, nor ours."""
    x = torch.randn(5, requires_grad=True)
    compiled = aot_function(lambda x: x * 3, CountingCompiler())
    (grad,) = torch.autograd.grad(compiled(x).sum(), [x], create_graph=True)
    (expected,) = torch.autograd.grad((x * 3).sum(), [x], create_graph=True)
    torch.testing.assert_close(grad, expected)
    assert grad.requires_grad == expected.requires_grad


def _dropout_square(x):
    return torch.nn.functional.dropout(x, 0.5, training=True).square()


def _scaled_in_place(x, buffer):
    buffer.add_(1)
    return (x * buffer).square()


@pytest.mark.parametrize(
    ("fn", "reason"),
    [(_dropout_square, "draws random numbers"), (_scaled_in_place, "writes its inputs")],
)
def test_a_recomputation_that_would_differ_is_refused_loudly(fn, reason):
    x = torch.randn(8, requires_grad=True)
    args = (x,) if fn is _dropout_square else (x, torch.ones(8))
    compiled = aot_function(fn, CountingCompiler())
    (grad,) = torch.autograd.grad(compiled(*args).sum(), [x], create_graph=True)
    assert grad.requires_grad  # eager's does: never silently detached
    with pytest.raises(RuntimeError, match=reason):
        grad.sum().backward()


def test_an_input_written_after_the_forward_is_refused():
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4)
    compiled = aot_function(lambda x, w: (x + w).sin(), CountingCompiler())
    out = compiled(x, w)
    w.add_(1)  # eager saved x + w, not w: a recomputation would read the new w
    (grad,) = torch.autograd.grad(out.sum(), [x], create_graph=True)
    torch.testing.assert_close(grad, (x + w - 1).cos())
    with pytest.raises(RuntimeError, match="written in place after the forward"):
        grad.sum().backward()
