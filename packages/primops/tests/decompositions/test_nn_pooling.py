"""Pooling and resampling forwards in decompositions/nn_pooling.py beyond the op_db sweep's
samples: bicubic interpolation on channels-last and bfloat16 images (timm's CrossViT
resizes its input image this way), and every op's result layout where eager's suggested
memory format decides it (sliced, one-channel and 1x1 channels-last maps)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops.decompose_mode import DecomposeMode


@pytest.mark.parametrize(
    "dtype,size,align_corners,atol",
    [(torch.float32, (16, 20), False, 1e-5), (torch.float32, (13, 4), True, 1e-5),
     (torch.bfloat16, (240, 240), False, 0.04)],
)  # fmt: skip
def test_bicubic_interpolation_of_channels_last_images(dtype, size, align_corners, atol):
    torch.manual_seed(0)
    side = 224 if size == (240, 240) else 10
    image = torch.randn(2, 3, side, side + 1, dtype=dtype).to(memory_format=torch.channels_last)
    want = F.interpolate(image, size=size, mode="bicubic", align_corners=align_corners)
    mode = DecomposeMode(strict=True)
    with mode:
        got = F.interpolate(image, size=size, mode="bicubic", align_corners=align_corners)
    assert "aten.upsample_bicubic2d.default" in mode.decomposed_counts
    assert got.dtype == dtype and got.stride() == want.stride()
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=atol)


LAYOUTS = {
    "channels-last slice": lambda: torch.randn(2, 3, 20, 20).to(memory_format=torch.channels_last)[
        ..., :9, :11
    ],
    "channels-last, one channel": lambda: torch.randn(2, 1, 20, 20).to(
        memory_format=torch.channels_last
    ),
    "channels-last, 1x1 map": lambda: torch.randn(2, 3, 1, 1).to(memory_format=torch.channels_last),
    "1x1 map": lambda: torch.randn(2, 3, 1, 1),
    "channel slice": lambda: torch.randn(2, 3, 20, 20).to(memory_format=torch.channels_last)[:, :2],
    "transposed": lambda: torch.randn(2, 3, 20, 20).permute(0, 1, 3, 2),
}
RESAMPLES = {
    "max_pool": lambda t: F.max_pool2d(t, 1),
    "avg_pool": lambda t: F.avg_pool2d(t, 1),
    "bicubic": lambda t: F.interpolate(t, scale_factor=2, mode="bicubic"),
    "nearest": lambda t: F.interpolate(t, scale_factor=2),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("resample", sorted(RESAMPLES))
def test_pooling_and_resampling_answer_in_eagers_suggested_layout(layout, resample):
    # eager reads the input's stride order, dense or not: a sliced NHWC map answers NHWC
    x, fn = LAYOUTS[layout](), RESAMPLES[resample]
    want = fn(x)
    with DecomposeMode(strict=True):
        got = fn(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
