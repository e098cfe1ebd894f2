"""The whole pipeline (ember.compile -> tracer -> aot -> prims -> loop IR -> Triton) on CPU
tensors under the interpreter, with the umbrella's EMBER_INDUCTOR_TARGET=triton override."""

import pytest
import torch

ember = pytest.importorskip("ember")


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(12, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.softmax(self.norm(torch.nn.functional.gelu(self.fc(x))), dim=-1).sum(0)


def test_model_forward_and_backward_through_ember_compile(monkeypatch):
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    torch.manual_seed(0)
    model, x = _Block(), torch.randn(6, 12)
    compiled = ember.compile(model, backend="inductor")
    want = model(x)
    got = compiled(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    got.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want.sum().backward()
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)
    assert ember.counters["inductor"]["kernels"] >= 2
