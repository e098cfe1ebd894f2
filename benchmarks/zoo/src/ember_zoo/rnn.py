"""Loop-heavy recurrent model: a hand-written GRU cell stepped by a Python ``for`` loop.

The loop runs over the time dimension inside ``forward``, so a tracing compiler has to
unroll it (or otherwise handle it); the cell is built from Linear layers and pointwise ops
rather than ``nn.GRU``, which would hide the loop inside one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class RNNConfig:
    batch: int
    steps: int
    in_features: int
    hidden: int
    out_features: int


CONFIGS = {
    "tiny": RNNConfig(batch=4, steps=8, in_features=16, hidden=32, out_features=8),
    "real": RNNConfig(batch=32, steps=32, in_features=256, hidden=512, out_features=256),
}


class GRUCell(nn.Module):
    def __init__(self, in_features: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.x2h = nn.Linear(in_features, 3 * hidden)
        self.h2h = nn.Linear(hidden, 3 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xr, xz, xn = self.x2h(x).chunk(3, dim=-1)
        hr, hz, hn = self.h2h(h).chunk(3, dim=-1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h


class LoopRNN(nn.Module):
    """Encodes a (batch, steps, features) sequence; returns per-step outputs."""

    def __init__(self, cfg: RNNConfig) -> None:
        super().__init__()
        self.cell = GRUCell(cfg.in_features, cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], self.cell.hidden)
        outputs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outputs.append(self.head(h))
        return torch.stack(outputs, dim=1)


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, target)


def make(size: str) -> CaseParts:
    cfg = CONFIGS[size]
    model = LoopRNN(cfg)
    x = torch.randn(cfg.batch, cfg.steps, cfg.in_features)
    target = torch.randn(cfg.batch, cfg.steps, cfg.out_features)
    return CaseParts(model=model, inputs=(x,), kwargs={}, loss_fn=_loss, targets=(target,))
