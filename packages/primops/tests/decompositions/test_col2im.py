"""col2im (``F.fold``) as a sum of spread, shifted planes matches eager's kernel: exactly in
float32, and within a rounding in bfloat16 (accumulated in float32 as eager's GPU kernel
does; its CPU kernel adds into a bfloat16 image)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops.decompose_mode import DecomposeMode

CASES = [  # output size, kernel, padding, stride, dilation
    ((14, 14), 3, 1, 2, 1),  # VOLO's outlook attention
    ((7, 9), (2, 3), (0, 1), (1, 2), 1),
    ((10, 10), 3, 2, 1, 2),
    ((5, 6), 4, 0, 4, 1),  # non-overlapping windows
]


def _blocks(size, kernel, padding, stride, dilation):
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    k, p, s, d = pair(kernel), pair(padding), pair(stride), pair(dilation)
    count = 1
    for i in (0, 1):
        count *= (size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
    return count, k[0] * k[1]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batched", [True, False])
def test_fold_matches_eager(case, dtype, batched):
    size, kernel, padding, stride, dilation = case
    blocks, taps = _blocks(size, kernel, padding, stride, dilation)
    shape = (2, 3 * taps, blocks) if batched else (3 * taps, blocks)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    args = dict(kernel_size=kernel, padding=padding, stride=stride, dilation=dilation)
    expected = F.fold(x, size, **args)
    with DecomposeMode(strict=True):
        got = F.fold(x, size, **args)
    assert got.shape == expected.shape and got.stride() == expected.stride()
    if dtype == torch.float32:
        assert torch.equal(got, expected)
    else:  # one bfloat16 rounding of sums of up to 9 values of about 1
        torch.testing.assert_close(got, expected, atol=2**-4, rtol=2**-7)
