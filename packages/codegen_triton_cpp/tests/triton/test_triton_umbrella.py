"""The whole pipeline (ember.compile -> tracer -> aot -> prims -> loop IR -> Triton) on CPU
tensors under the interpreter, with the umbrella's EMBER_INDUCTOR_TARGET=triton override."""

import os

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


def test_triton_graphs_come_back_from_the_artifact_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_ARTIFACT_CACHE", raising=False)
    torch.manual_seed(0)
    model, x = _Block(), torch.randn(6, 12)
    results = []
    for _ in range(2):  # cold, then warm (after a reset: nothing in memory)
        ember.reset()
        # a fresh process has not pointed Triton's binary cache under ours yet
        monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
        compiled = ember.compile(model, backend="inductor")
        out = compiled(x)
        out.sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
        model.zero_grad()
        stats = dict(ember.counters["inductor"])
    assert stats.get("codegen_cache_hits", 0) == 2, stats  # forward and backward graphs
    # the warm load found Triton's binaries where the cold compile put them
    assert os.environ["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert stats.get("codegen_cache_bypasses", 0) == 0, stats
    (cold, cold_grads), (warm, warm_grads) = results
    torch.testing.assert_close(warm, cold)
    for a, b in zip(cold_grads, warm_grads, strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(warm, model(x), atol=1e-5, rtol=1e-5)
