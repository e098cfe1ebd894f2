"""A half-precision addmm (a linear layer under autocast) is eager's one library call: the
bias added in the GEMM's epilogue, the sum rounded once. As mm then add it rounded the
product to bfloat16 first, and on the GPU the add was a kernel of its own wherever nothing
else fused it (an attention's qkv projection, read through views)."""

from __future__ import annotations

import pytest
import torch

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_addmm_is_one_call_and_bit_equal(dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 96, generator=gen).to(dtype)
    weight = torch.randn(48, 96, generator=gen).to(dtype)
    bias = torch.randn(48, generator=gen).to(dtype)
    expected = aten.addmm(bias, x, weight.t())
    mode = DecomposeMode(strict=True)
    with mode:
        got = aten.addmm(bias, x, weight.t())
    assert mode.decomposed_counts.get("aten.addmm.default") == 1, mode.decomposed_counts
    assert torch.equal(got, expected)


def test_scaled_or_float32_addmm_is_a_product_and_a_sum():
    gen = torch.Generator().manual_seed(1)
    x, w, b = (torch.randn(8, 16, generator=gen), torch.randn(16, 4, generator=gen),
               torch.randn(4, generator=gen))  # fmt: skip
    for dtype, beta in ((torch.float32, 1), (torch.bfloat16, 2)):
        args = (b.to(dtype), x.to(dtype), w.to(dtype))
        expected = aten.addmm(*args, beta=beta)
        with DecomposeMode(strict=True):
            got = aten.addmm(*args, beta=beta)
        torch.testing.assert_close(got, expected, atol=0.05, rtol=0.02)
