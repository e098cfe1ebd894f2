"""layer_norm's result has eager's strides (contiguous) whatever its input's strides.

ConvNeXt normalizes a permuted (NHWC view of an NCHW) feature map and feeds the result to a
Linear. Eager's kernels write a contiguous result; a decomposition that kept the permuted
strides made the following matmul see a batch it cannot fold into one mm, and it went
through bmm with the weight expanded: one copy of the weight per batch row (1 GB of copies
in convnext_tiny at batch 32).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten


def _inputs(dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 5, 6, generator=gen).to(dtype).permute(0, 2, 3, 1)  # NHWC view
    return x, torch.randn(8, generator=gen).to(dtype), torch.randn(8, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_of_a_permuted_input_is_contiguous_like_eager(dtype):
    x, weight, bias = _inputs(dtype)
    expected = aten.native_layer_norm(x, [8], weight, bias, 1e-6)
    with DecomposeMode(strict=True):
        got = aten.native_layer_norm(x, [8], weight, bias, 1e-6)
    assert not x.is_contiguous()
    for g, e in zip(got, expected, strict=True):
        assert g.stride() == e.stride(), (g.stride(), e.stride())
        torch.testing.assert_close(g, e, atol=1e-2 if dtype == torch.bfloat16 else 1e-5, rtol=0)


def test_linear_after_layer_norm_of_a_permuted_input_is_one_mm():
    x, weight, bias = _inputs(torch.float32)
    w = torch.randn(16, 8)
    with DecomposeMode(strict=True) as mode:
        got = F.linear(F.layer_norm(x, (8,), weight, bias, 1e-6), w)
    torch.testing.assert_close(got, F.linear(F.layer_norm(x, (8,), weight, bias, 1e-6), w))
    assert mode.prim_counts["ember_prims.mm.default"] == 1
    assert mode.prim_counts["ember_prims.bmm.default"] == 0  # no weight copy per batch row
