"""Whether a tensor's elements fill its memory span exactly once (in some dimension order)."""

from __future__ import annotations

import torch


def is_dense(tensor: torch.Tensor) -> bool:
    """True for contiguous tensors and permutations of them (transposes, channels-last);
    False for expanded (stride 0), sliced-with-gaps or otherwise overlapping layouts."""
    if tensor.is_contiguous():
        return True
    expected = 1
    for size, stride in sorted(
        ((n, s) for n, s in zip(tensor.shape, tensor.stride(), strict=True) if n != 1),
        key=lambda item: item[1],
    ):
        if stride != expected:
            return False
        expected *= size
    return True
