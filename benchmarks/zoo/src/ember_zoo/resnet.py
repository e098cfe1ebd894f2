"""torchvision's ResNet (optional: listed only where torchvision is installed, e.g. the GPU
machine): resnet18 at "tiny" size, resnet50 on ImageNet-sized images at "real" size."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ember_zoo.registry import CaseParts

CONFIGS = {
    "tiny": ("resnet18", 2, 64, 10),  # architecture, batch, image size, classes
    "real": ("resnet50", 32, 224, 1000),
}


def _loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def make(size: str) -> CaseParts:
    import torchvision  # optional dependency of this family only

    arch, batch, image, classes = CONFIGS[size]
    model = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
    x = torch.randn(batch, 3, image, image)
    labels = torch.randint(0, classes, (batch,))
    return CaseParts(model=model, inputs=(x,), kwargs={}, loss_fn=_loss, targets=(labels,))
