"""Small convolutional classifier: (conv, batchnorm, relu, maxpool) stages, then linear."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class CNNConfig:
    batch: int
    image: int  # square input resolution
    channels: tuple[int, ...]  # output channels of each stage; each stage halves resolution
    classes: int


CONFIGS = {
    "tiny": CNNConfig(batch=4, image=16, channels=(8, 16), classes=10),
    "real": CNNConfig(batch=16, image=64, channels=(32, 64, 128, 256), classes=100),
}


class CNN(nn.Module):
    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        stages = []
        in_ch = 3
        for out_ch in cfg.channels:
            stages += [
                # bias is redundant before BatchNorm, as in common CNNs
                nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(out_ch),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            in_ch = out_ch
        self.features = nn.Sequential(*stages)
        self.head = nn.Linear(in_ch, cfg.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


def _loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def make(size: str) -> CaseParts:
    cfg = CONFIGS[size]
    model = CNN(cfg)
    x = torch.randn(cfg.batch, 3, cfg.image, cfg.image)
    labels = torch.randint(0, cfg.classes, (cfg.batch,))
    return CaseParts(model=model, inputs=(x,), kwargs={}, loss_fn=_loss, targets=(labels,))
