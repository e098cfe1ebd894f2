"""The backward of nearest upsampling and of unfold (decompositions/resample_backward.py)
equals aten's: whole upscale factors as block sums, other ratios (fractional scales, given
sizes, downsampling) as scatter-adds, in 1-3 spatial dims, nearest and nearest-exact, in
the gradient's memory format; unfold's windows gathered, or scattered when too many."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten

# (input shape, interpolate kwargs, whole factor: block sums, no scatter)
NEAREST = [
    ((2, 3, 4, 5), {"scale_factor": 2}, True),  # HRNet's fusion upsampling
    ((2, 3, 4, 5), {"size": (12, 20)}, True),
    ((2, 3, 4, 5), {"scale_factor": (2, 3)}, True),
    ((2, 3, 4, 5), {"scale_factor": 2.5}, False),
    ((2, 3, 4, 5), {"size": (9, 11)}, False),
    ((2, 3, 6, 7), {"size": (4, 5)}, False),  # downsampling
    ((2, 3, 5), {"scale_factor": 3}, True),
    ((1, 2, 3, 4, 5), {"scale_factor": 2}, True),
]


def _run(op, *args):
    mode = DecomposeMode(strict=True)  # strict: no aten fallback
    with mode:
        got = op(*args)
    return got, op(*args), mode


@pytest.mark.parametrize("case", NEAREST)
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_nearest_upsampling_gradients_equal_atens(case, exact, channels_last):
    shape, kwargs, whole = case
    torch.manual_seed(0)
    x = torch.randn(shape)
    if channels_last and x.dim() == 4:
        x = x.to(memory_format=torch.channels_last)
    out = F.interpolate(x, mode="nearest-exact" if exact else "nearest", **kwargs)
    grad = torch.randn_like(out)
    n = x.dim() - 2
    name = f"_upsample_nearest_exact{n}d_backward" if exact else f"upsample_nearest{n}d_backward"
    factor = kwargs.get("scale_factor")
    scales = [None] * n if factor is None else list(torch.broadcast_to(torch.tensor(factor), (n,)))
    scales = [None if s is None else float(s) for s in scales]
    got, want, mode = _run(getattr(aten, name).default, grad, list(out.shape[2:]), list(shape),
                           *scales)  # fmt: skip
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert got.stride() == want.stride()
    assert ("ember_prims.scatter_add.default" in mode.prim_counts) is not whole


def test_nearest_upsampling_gradient_in_bfloat16():
    grad = torch.randn(2, 8, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    got, want, _ = _run(aten.upsample_nearest2d_backward.default, grad, [8, 8], [2, 8, 4, 4])
    assert got.dtype == torch.bfloat16 and got.stride() == want.stride()
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "dim,size,step,scatter",
    [(1, 3, 2, False), (1, 4, 4, False), (1, 2, 3, False), (0, 2, 1, False), (-1, 1, 1, False),
     (1, 12, 8, False), (1, 20, 1, True)],
)  # fmt: skip
def test_unfold_gradients_equal_atens(dim, size, step, scatter):
    torch.manual_seed(0)
    x = torch.randn(2, 40, 3)
    grad = torch.randn_like(x.unfold(dim, size, step))
    got, want, mode = _run(aten.unfold_backward.default, grad, list(x.shape), dim, size, step)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert ("ember_prims.scatter_add.default" in mode.prim_counts) is scatter


def test_unfold_gradient_of_a_scalar():
    got, want, _ = _run(aten.unfold_backward.default, torch.randn(1), [], 0, 1, 1)
    torch.testing.assert_close(got, want)
