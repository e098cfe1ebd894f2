"""A ReLU(inplace=True) whose input comes from another graph: the second graph writes an
activation that requires grad, as a ResNet split into graphs at a graph break does. The
training step (outputs, the written activation, every gradient) must equal eager's, with
both graphs compiled forward and backward."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import ember


class Stage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.head = nn.Linear(8 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x))
        print(end="")  # I/O: a graph break here
        y = self.relu(y)  # the next graph writes its input, which requires grad
        return self.head(y.flatten(1)) + y.mean()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inplace_relu_on_an_activation_from_another_graph(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    eager = Stage().train()
    compiled_model = copy.deepcopy(eager)
    ember.reset()
    compiled = ember.compile(compiled_model, backend=backend)
    x = torch.randn(4, 3, 8, 8)
    expected = eager(x)
    got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    expected.sum().backward()
    got.sum().backward()
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    for name, a, b in zip(
        [n for n, _ in eager.named_buffers()],
        compiled_model.buffers(),
        eager.buffers(),
        strict=True,
    ):
        torch.testing.assert_close(a, b, msg=name)
    stats = ember.counters[backend]
    assert stats["forward_graphs"] >= 2 and stats["backward_graphs"] >= 2, dict(stats)
    assert stats["backward_runs"] >= 2, dict(stats)
