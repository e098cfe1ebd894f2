"""A power with one of the scalar exponents eager's kernels special-case (2, 3, -1, -2) is
the multiplies eager computes, and no pow prim (a libm pow per element on
the GPU: GPT-2's tanh GELU cubes its input). Bit-equal to eager in float32 and float64; in
half precision eager's CPU kernels round between the multiplies where its CUDA kernels (and
Ember's, in float32) round once, so those agree to one rounding step."""

from __future__ import annotations

import pytest
import torch

from ember_primops.decompose_mode import DecomposeMode

SPECIALS = [-0.0, 0.0, -1.0, float("inf"), -float("inf"), float("nan"), 2.0, 1e-30, 3.3, -7.5]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("exponent", [2, 3, -1, -2, 2.0, 3.0])
def test_special_exponents_match_eager_without_pow(dtype, exponent):
    x = torch.cat([torch.tensor(SPECIALS), torch.randn(32) * 4]).to(dtype)
    mode = DecomposeMode(strict=True)
    with mode:
        got = torch.pow(x, exponent)
    assert "ember_prims.pow.default" not in mode.prim_counts, mode.prim_counts
    expected = torch.pow(x, exponent)
    assert got.dtype == expected.dtype
    assert torch.equal(got.isnan(), expected.isnan())
    if dtype in (torch.float32, torch.float64):
        assert torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0)), (got, expected)
    else:
        step = torch.finfo(dtype).eps
        torch.testing.assert_close(got, expected, rtol=step, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    ("base", "exponent"),
    [
        (torch.arange(-3, 4), 2),  # integer base: integer pow
        (torch.rand(8) + 0.5, 1.7),  # any other exponent
        (torch.tensor([-0.0, -float("inf"), 4.0]).half(), 0.5),  # roots: pow's special values
        (torch.rand(8) + 0.5, torch.rand(8)),  # a tensor exponent
        (2.0, torch.rand(8)),  # a scalar base
    ],
)
def test_other_powers_stay_pow(base, exponent):
    mode = DecomposeMode(strict=True)
    with mode:
        got = torch.pow(base, exponent)
    assert mode.prim_counts["ember_prims.pow.default"] == 1, mode.prim_counts
    torch.testing.assert_close(got, torch.pow(base, exponent))
