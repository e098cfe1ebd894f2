"""Issue 15 end to end: float32 CPU linears over 64-256 rows run through oneDNN's linear
(ember_codegen's onednn_matmul) in the inference and the training graphs; values and
gradients against eager, the products counted in the generated wrappers."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.stats import counters
from ember_codegen.cpp.emit import onednn_matmul

pytestmark = pytest.mark.skipif(
    not onednn_matmul.ENABLED, reason="no oneDNN, or EMBER_CPU_ONEDNN_MM=0"
)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    counters.clear()
    ember.reset()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    monkeypatch.setenv("EMBER_CPU_ONEDNN_MM", "1")  # routed whatever this CPU's verdict
    yield
    ember.reset()


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)  # 128 x 256 @ 256 x 256: 8M multiply-adds a layer
    return torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)
    )


def test_inference_products_go_to_onednn_and_match_eager(output_code):
    model = _mlp().eval()
    compiled = ember.compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(128, 256)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    text = output_code()
    assert " = _dnn_mm(" in text  # first layer: its bias is fused with the GELU
    assert " = _dnn_addmm(" in text  # the last layer's bias in the product
    assert counters["inductor"]["forward_graphs"] == 1


def test_training_gradients_through_onednn_match_eager(output_code, train_like_eager):
    model, reference = _mlp(), _mlp()
    compiled = ember.compile(model)
    batch = lambda: (torch.randn(128, 256), torch.randn(128, 256))  # noqa: E731
    train_like_eager(model, reference, compiled, batch, rtol=1e-4, atol=1e-5)
    text = output_code()
    assert "_dnn_" in text  # forward products and input gradients
    assert "_mm_out(" in text  # weight gradients (g.t() @ x) keep MKL
    assert counters["inductor"]["backward_graphs"] >= 1
