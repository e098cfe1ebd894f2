"""Pooling's backward (decompositions/pool_backward.py). Max: the gather form equals aten's
scatter for overlapping, padded, dilated and ceil-mode windows, ties and channels-last
inputs, in 2-d and 3-d; windows an element lies in too many of scatter-add instead.
Average: the gather form equals aten's kernel for every divisor rule (padding counted or
not, ceil mode's partial windows, an override), in one pass or one dim a pass."""

from __future__ import annotations

import pytest
import torch

from ember_primops.decompose_mode import DecomposeMode
from ember_primops.decompositions import pool_backward

aten = torch.ops.aten

# (input shape, kernel, stride, padding, dilation, ceil_mode)
CASES_2D = [
    ((2, 3, 9, 11), 3, 2, 1, 1, False),  # ResNet's stem pool: overlapping windows
    ((2, 3, 9, 11), 3, 2, 1, 1, True),
    ((2, 3, 10, 10), 2, 2, 0, 1, False),
    ((1, 2, 12, 12), 3, 1, 1, 1, False),  # 9 windows an element
    ((1, 2, 13, 12), 3, 2, 1, 2, False),  # dilated
    ((2, 4, 8, 8), (3, 2), (2, 1), (1, 0), 1, True),
]


def _backward(shape, kernel, stride, padding, dilation, ceil_mode, channels_last=False):
    torch.manual_seed(0)
    x = torch.randn(shape).round()  # many ties: the saved index decides
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    pool = aten.max_pool2d_with_indices if x.dim() == 4 else aten.max_pool3d_with_indices
    back = (
        aten.max_pool2d_with_indices_backward
        if x.dim() == 4
        else aten.max_pool3d_with_indices_backward
    )
    out, indices = pool(x, kernel, stride, padding, dilation, ceil_mode)
    grad = torch.randn_like(out)
    args = (grad, x, kernel, stride, padding, dilation, ceil_mode, indices)
    mode = DecomposeMode(strict=True)
    with mode:
        got = back(*args)
    return got, back(*args), mode


@pytest.mark.parametrize("case", CASES_2D)
def test_gathered_gradients_equal_atens(case):
    got, want, mode = _backward(*case)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert "ember_prims.index.default" in mode.prim_counts
    assert "ember_prims.scatter_add.default" not in mode.prim_counts


def test_channels_last_and_3d_inputs():
    got, want, _ = _backward((2, 5, 9, 7), 3, 2, 1, 1, False, channels_last=True)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert got.stride() == want.stride()  # channels-last, as eager's: no transposing copy
    got, want, mode = _backward((1, 2, 7, 6, 5), 3, 2, 1, 1, False)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert "ember_prims.scatter_add.default" not in mode.prim_counts  # 8 windows an element


def test_elements_in_many_windows_scatter_instead():
    assert pool_backward.MAX_GATHERED_WINDOWS < 25
    got, want, mode = _backward((1, 2, 12, 12), 5, 1, 2, 1, False)  # 25 windows an element
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert "ember_prims.scatter_add.default" in mode.prim_counts


def _record_gathers(monkeypatch) -> list[torch.Tensor]:
    """The tensors pool_backward's gathers (prims.index) read, as they happen."""
    real = pool_backward.prims
    sources = []

    class Recording:
        def __getattr__(self, name):
            return getattr(real, name)

        def index(self, source, where):
            sources.append(source)
            return real.index(source, where)

    monkeypatch.setattr(pool_backward, "prims", Recording())
    return sources


def test_the_gathers_read_the_index_narrowed_to_int32(monkeypatch):
    # narrowed once before its four gathers: a recomputed index is then stored as int32
    read = _record_gathers(monkeypatch)
    got, want, _ = _backward(*CASES_2D[0])
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    dtypes = [t.dtype for t in read]
    assert dtypes.count(torch.int32) == 4 and torch.int64 not in dtypes, dtypes


# (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ((2, 3, 17, 17), 3, 1, 1, False, True, None),  # Inception's branch pools: 9 windows
    ((2, 3, 9, 11), 3, 2, 1, True, False, None),  # ceil mode's partial last windows
    ((2, 3, 9, 11), 3, 2, 1, True, True, None),
    ((2, 4, 10, 10), 2, 2, 0, False, True, None),
    ((1, 2, 12, 13), (3, 5), (1, 2), (1, 2), True, False, None),
    ((2, 3, 9, 11), 3, 2, 1, False, True, 7),
    ((1, 2, 12, 12), 5, 1, 2, False, False, None),  # 25 windows: one dim a pass
    ((1, 2, 12, 12), 5, 1, 2, False, True, 3),
    ((1, 2, 7, 6, 5), 3, 2, 1, False, True, None),
    ((1, 2, 7, 6, 5), 3, 1, 1, True, False, None),
    ((1, 2, 10, 10), 3, 2, 0, True, True, None),  # ceil mode: the last windows cut short
]


def _avg_backward(shape, kernel, stride, padding, ceil_mode, include_pad, override, **like):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=like.get("dtype", torch.float32))
    if like.get("channels_last"):
        x = x.to(memory_format=torch.channels_last)
    pool = aten.avg_pool2d if x.dim() == 4 else aten.avg_pool3d
    back = aten.avg_pool2d_backward if x.dim() == 4 else aten.avg_pool3d_backward
    args = (x, kernel, stride, padding, ceil_mode, include_pad, override)
    grad = torch.randn_like(pool(*args))
    mode = DecomposeMode(strict=True)  # strict: no aten fallback
    with mode:
        got = back(grad, *args)
    return got, back(grad, *args), mode


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_average_pool_gradients_equal_atens(case, channels_last):
    got, want, mode = _avg_backward(*case, channels_last=channels_last and len(case[0]) == 4)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert got.stride() == want.stride()
    assert mode.decomposed_counts and "ember_prims.index.default" in mode.prim_counts


def test_average_pool_gathers_all_dims_at_once_up_to_the_window_limit(monkeypatch):
    gathered = _record_gathers(monkeypatch)
    _avg_backward(*AVG_CASES[0])
    assert len(gathered) == 9 and {tuple(t.shape) for t in gathered} == {(2, 3, 17, 17)}
    gathered.clear()
    _avg_backward(*AVG_CASES[6])  # 5 windows along each dim: two passes of 5 gathers
    assert [tuple(t.shape) for t in gathered] == [(1, 2, 12, 12)] * 10


def test_average_pool_gradient_in_bfloat16():
    got, want, _ = _avg_backward(*AVG_CASES[0], dtype=torch.bfloat16, channels_last=True)
    assert got.dtype == torch.bfloat16 and got.stride() == want.stride()
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


def test_average_pool_divides_once_where_every_window_has_the_kernels_count():
    # padding counted and no window cut short: one constant, no per-window sizes
    _, _, mode = _avg_backward(*AVG_CASES[0])
    assert mode.prim_counts["ember_prims.div.default"] == 3  # each dim's last window; the 9
    _, _, mode = _avg_backward(*AVG_CASES[-1])  # divided by each window's own count
    assert mode.prim_counts["ember_prims.div.default"] == 2 + 4
