"""Training-mode batch norm compiled by the CPU `inductor` backend is bit-equal to eager.

The decomposition follows eager's CPU kernel rounding for rounding (float64 statistics, fused
multiply-adds); this checks that the loop IR and the C++ kernels keep it so. A max-pool after
the norm makes tolerance not enough: one rounding difference can flip a window's argmax and
send its gradient to the neighbouring element.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import ember


def _chain() -> nn.Sequential:
    torch.manual_seed(0)
    # no conv bias: batch norm cancels it, so its gradient is rounding noise around zero
    conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
    chain = nn.Sequential(conv, nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
    with torch.no_grad():
        chain[1].weight.uniform_(0.5, 1.5)
        chain[1].bias.uniform_(-0.5, 0.5)
    return chain.train()


def test_training_batch_norm_forward_and_statistics_bit_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    eager = _chain()
    compiled_chain = copy.deepcopy(eager)
    ember.reset()
    compiled = ember.compile(compiled_chain, backend="inductor")
    x = torch.randn(32, 8, 24, 24) * 3 + 1
    expected = eager[:3](x)  # up to the ReLU: the values the max-pool compares
    got = ember.compile(compiled_chain[:3], backend="inductor")(x)
    assert torch.equal(got, expected), f"{(got != expected).sum().item()} elements differ"
    for g, e in zip(compiled_chain.buffers(), eager.buffers(), strict=True):
        assert torch.equal(g, e)
    stats = ember.counters["inductor"]
    assert stats["forward_graphs"] >= 1 and not ember.counters["aten_fallbacks"]

    # a training step through the whole chain: gradients equal to eager's within rounding
    grad_out = torch.randn(32, 16, 12, 12)
    x_eager = x.clone().requires_grad_()
    x_compiled = x.clone().requires_grad_()
    (eager(x_eager) * grad_out).sum().backward()
    (compiled(x_compiled) * grad_out).sum().backward()
    torch.testing.assert_close(x_compiled.grad, x_eager.grad, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(eager.named_parameters(), compiled_chain.parameters(), strict=True):
        scale = max(1.0, p.grad.abs().max().item())
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
    assert ember.counters["inductor"]["backward_runs"] >= 1
