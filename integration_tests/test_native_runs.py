"""Issue 15 end to end: the C++ wrapper calls each run of kernels between extern calls
through one native entry point, and a linear layer whose output only the graph returns (or
a library kernel reads) runs as ``addmm(bias, x, w, out=)``; with static and symbolic sizes,
in inference and training, against eager."""

from __future__ import annotations

import re

import pytest
import torch

import ember
from ember.stats import counters


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    counters.clear()
    ember.reset()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    yield
    ember.reset()


def norms(x, w):
    """Row and column statistics (kernels that cannot share a loop nest), a matmul, and
    more of them after it: two runs of kernels around one extern."""
    a = x.exp()
    h = (a - a.mean(0)) / (a.std(1, keepdim=True) + 1)
    y = h @ w
    return y.softmax(0) + y.log_softmax(1)


@pytest.mark.parametrize("dynamic", [False, True])
def test_runs_of_kernels_are_one_native_call(output_code, dynamic):
    torch.manual_seed(0)
    w = torch.randn(24, 16)
    compiled = ember.compile(norms, dynamic=dynamic)
    for rows in (8, 13, 21) if dynamic else (8, 8):
        x = torch.randn(rows, 24)
        torch.testing.assert_close(compiled(x, w), norms(x, w), rtol=1e-4, atol=1e-4)
    text = output_code()
    # an entry point in the graph's library (named after the run's first kernel, k<N>_...)
    entry = re.search(r"EMBER_KERNEL void (run_k\d+_\w+)\(", text)
    assert entry is not None
    assert f"_{entry.group(1)}(" in text  # called by the wrapper
    assert counters["inductor"]["forward_graphs"] == 1


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_final_linear_is_one_addmm(output_code, dynamic):
    model = _mlp().eval()
    compiled = ember.compile(model, dynamic=dynamic)
    with torch.no_grad():
        for rows in (3, 7, 10) if dynamic else (4, 4):
            x = torch.randn(rows, 12)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    text = output_code()
    assert text.count("_addmm_out(") == 1  # the last layer; the first keeps bias + relu fused
    assert "_mm_out(" in text


def test_training_through_addmm_matches_eager(output_code, train_like_eager):
    model, reference = _mlp(), _mlp()
    compiled = ember.compile(model)
    batch = lambda: (torch.randn(6, 12), torch.randn(6, 5))  # noqa: E731
    train_like_eager(model, reference, compiled, batch, rtol=1e-5, atol=1e-5)
    assert "_addmm_out(" in output_code()
    assert counters["inductor"]["backward_graphs"] >= 1


def test_runs_come_back_from_the_artifact_cache(monkeypatch):
    """The codegen artifact cache stores the runs with the kernels: a graph loaded from it
    calls the same entry points (the aot level is bypassed so the codegen level is read)."""
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "1")
    torch.manual_seed(0)
    x, w = torch.randn(8, 24), torch.randn(24, 16)
    for _ in range(2):
        ember.reset()
        counters.clear()
        got = ember.compile(norms)(x, w)
        torch.testing.assert_close(got, norms(x, w), rtol=1e-4, atol=1e-4)
        stats = dict(counters["inductor"])
        assert not stats.get("codegen_cache_bypasses"), stats
    assert stats.get("codegen_cache_hits") == 1, stats  # from_payload rebuilt the runs
