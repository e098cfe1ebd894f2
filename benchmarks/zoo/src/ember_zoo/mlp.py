"""Plain multi-layer perceptron: Linear + GELU stack, cross-entropy against fixed labels."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class MLPConfig:
    batch: int
    in_features: int
    hidden: int
    depth: int  # number of hidden layers
    classes: int


CONFIGS = {
    "tiny": MLPConfig(batch=8, in_features=32, hidden=64, depth=2, classes=10),
    "real": MLPConfig(batch=128, in_features=512, hidden=2048, depth=4, classes=1000),
}


class MLP(nn.Module):
    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        widths = [cfg.in_features] + [cfg.hidden] * cfg.depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(widths))
        self.head = nn.Linear(widths[-1], cfg.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = F.gelu(layer(x))
        return self.head(x)


def _loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def make(size: str) -> CaseParts:
    cfg = CONFIGS[size]
    model = MLP(cfg)
    x = torch.randn(cfg.batch, cfg.in_features)
    labels = torch.randint(0, cfg.classes, (cfg.batch,))
    return CaseParts(model=model, inputs=(x,), kwargs={}, loss_fn=_loss, targets=(labels,))
