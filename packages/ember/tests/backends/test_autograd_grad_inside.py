"""`torch.autograd.grad` inside a compiled function: a graph break that runs autograd's
engine eagerly, through the compiled graph before it. Under create_graph=True that graph's
backward gives gradients with eager's history (their own gradients are eager's); without
it, gradients without history, as eager's."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def _doubled_gradient(x):
    y = (x**3 * x.sin()).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    return g * 2


def _plain_gradient(x):
    y = (x**3 * x.sin()).sum()
    (g,) = torch.autograd.grad(y, x)
    return g * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_graph_output_differentiates_like_eager(backend):
    x = torch.randn(6, requires_grad=True)
    compiled = ember.compile(_doubled_gradient, backend=backend)
    for _ in range(2):  # the second call reuses the compiled graphs
        out, expected = compiled(x), _doubled_gradient(x)
        torch.testing.assert_close(out, expected)
        assert out.requires_grad and expected.requires_grad
        torch.testing.assert_close(
            torch.autograd.grad(out.square().sum(), x),
            torch.autograd.grad(expected.square().sum(), x),
        )
    stats = ember.counters[backend]
    assert stats["forward_graphs"] == 2  # before and after the break at autograd.grad
    assert stats["forward_runs"] == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_gradient_has_no_history_as_in_eager(backend):
    x = torch.randn(6, requires_grad=True)
    out = ember.compile(_plain_gradient, backend=backend)(x)
    expected = _plain_gradient(x)
    torch.testing.assert_close(out, expected)
    assert not out.requires_grad and not expected.requires_grad
    assert ember.counters[backend]["forward_graphs"] == 2


def test_a_variant_loaded_from_the_artifact_cache_differentiates_like_eager():
    x = torch.randn(6, requires_grad=True)
    expected = torch.autograd.grad(_doubled_gradient(x).square().sum(), x)
    for _ in range(2):  # the second compile loads both variants from the on-disk cache
        ember.reset()
        out = ember.compile(_doubled_gradient, backend="inductor")(x)
        torch.testing.assert_close(torch.autograd.grad(out.square().sum(), x), expected)
    assert ember.counters["inductor"]["cache_hits"] == 2
