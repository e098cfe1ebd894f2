"""Training-mode batch norm of a CPU float32 input is bit-equal to eager's kernel.

Tolerance is not enough here: a max-pool after the norm picks its argmax among values one
rounding apart, so any rounding difference in the norm's output can send a whole gradient
to the neighbouring element (the zoo cnn's training step did exactly that).
"""

from __future__ import annotations

import pytest
import torch

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten

# contiguous inputs with spatial positions (the ones that take eager's per-channel kernel)
SHAPES = [(32, 64, 16, 16), (16, 128, 8, 8), (4, 3, 7, 5), (8, 5, 11), (2, 4, 3, 5, 6)]


def _case(shape, affine, seed):
    gen = torch.Generator().manual_seed(seed)
    channels = shape[1]
    shift = torch.randn([1, channels] + [1] * (len(shape) - 2), generator=gen) * 2
    x = torch.randn(shape, generator=gen) * 3 + shift
    weight = torch.randn(channels, generator=gen) if affine else None
    bias = torch.randn(channels, generator=gen) if affine else None
    running_mean = torch.randn(channels, generator=gen)
    running_var = torch.rand(channels, generator=gen) + 0.5
    return x, weight, bias, running_mean, running_var


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_native_batch_norm_training_is_bit_equal(shape, affine):
    x, weight, bias, running_mean, running_var = _case(shape, affine, seed=len(shape))
    eager_stats = (running_mean.clone(), running_var.clone())
    expected = aten.native_batch_norm(x, weight, bias, *eager_stats, True, 0.1, 1e-5)
    mode = DecomposeMode(strict=True)
    got_stats = (running_mean.clone(), running_var.clone())
    with mode:
        got = aten.native_batch_norm(x, weight, bias, *got_stats, True, 0.1, 1e-5)
    assert any("native_batch_norm" in k for k in mode.decomposed_counts), mode.decomposed_counts
    names = ("out", "save_mean", "save_invstd", "running_mean", "running_var")
    for name, g, e in zip(names, [*got, *got_stats], [*expected, *eager_stats], strict=True):
        mismatched = (g != e).sum().item()
        assert mismatched == 0, f"{name}: {mismatched} of {e.numel()} elements differ"


def test_functional_variant_returns_eager_statistics():
    x, weight, bias, running_mean, running_var = _case((8, 16, 9, 9), True, seed=3)
    expected = aten._native_batch_norm_legit_functional(
        x, weight, bias, running_mean, running_var, True, 0.1, 1e-5
    )
    with DecomposeMode(strict=True):
        got = aten._native_batch_norm_legit_functional(
            x, weight, bias, running_mean, running_var, True, 0.1, 1e-5
        )
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)
