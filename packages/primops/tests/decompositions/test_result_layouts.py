"""The strides decompositions give their results, against eager's (the oracle)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_leaves

from ember_primops import PrimInputError
from ember_primops.decompose_mode import DecomposeMode


def _nchw(*shape, fmt=torch.channels_last):
    return torch.randn(*shape).to(memory_format=fmt)


def _cat_dim1(*ts):
    return torch.cat(ts, 1)


def _max_pool(t):
    return F.max_pool2d(t, 2, return_indices=True)


# name -> (inputs, op): inputs made outside the mode (its randn is not eager's draw)
CASES = {
    "cat of channels_last": (lambda: (_nchw(1, 5, 4, 4), _nchw(1, 3, 4, 4)), _cat_dim1),
    "cat of mixed layouts": (
        lambda: (_nchw(1, 5, 4, 4), _nchw(1, 3, 4, 4, fmt=torch.contiguous_format)),
        _cat_dim1,
    ),
    "cat of channels_last_3d": (
        lambda: (_nchw(2, 3, 2, 3, 4, fmt=torch.channels_last_3d),) * 2,
        lambda a, b: torch.cat([a, b], 0),
    ),
    "max_pool2d of channels_last": (lambda: (_nchw(2, 3, 8, 8),), _max_pool),
    "max_pool2d of contiguous": (
        lambda: (_nchw(2, 3, 8, 8, fmt=torch.contiguous_format),),
        _max_pool,
    ),
    "avg_pool2d of channels_last": (lambda: (_nchw(2, 3, 8, 8),), lambda t: F.avg_pool2d(t, 2)),
    # a write through a view that is all of the base (x += y on x[:, :C]) is the source with
    # the base's strides; a partial view scatters
    "as_strided_scatter of a whole channels_last tensor": (
        lambda: (_nchw(2, 4, 3, 3), torch.randn(2, 4, 3, 3)),
        lambda a, b: torch.as_strided_scatter(a, b, a.shape, a.stride(), 0),
    ),
    "as_strided_scatter of a whole contiguous tensor": (
        lambda: (torch.randn(3, 5), _nchw(3, 5, fmt=torch.contiguous_format).t().contiguous().t()),
        lambda a, b: torch.as_strided_scatter(a, b, a.shape, a.stride(), 0),
    ),
    # through a row-major reshape of all of a contiguous base (logits += bias on a
    # matmul's [B, L, V] view of its [B * L, V] result): the source in the base's shape
    "as_strided_scatter through a reshape of a whole tensor": (
        lambda: (torch.randn(6, 5), torch.randn(2, 3, 5)),
        lambda a, b: torch.as_strided_scatter(a, b, (2, 3, 5), (15, 5, 1), 0),
    ),
    "as_strided_scatter through a transposed view of a whole tensor": (
        lambda: (torch.randn(6, 5), torch.randn(5, 6)),
        lambda a, b: torch.as_strided_scatter(a, b, (5, 6), (1, 5), 0),
    ),
    "as_strided_scatter of half a tensor": (
        lambda: (torch.randn(4, 6), torch.randn(4, 3)),
        lambda a, b: torch.as_strided_scatter(a, b, (4, 3), (6, 1), 3),
    ),
    "avg_pool3d of channels_last_3d": (
        lambda: (_nchw(2, 3, 4, 6, 6, fmt=torch.channels_last_3d),),
        lambda t: F.avg_pool3d(t, 2),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_result_strides_match_eager(name):
    make_inputs, op = CASES[name]
    inputs = make_inputs()
    expected = op(*inputs)
    with DecomposeMode():
        got = op(*inputs)
    for g, e in zip(tree_leaves(got), tree_leaves(expected), strict=True):
        assert g.stride() == e.stride()
        torch.testing.assert_close(g, e)


def test_min_over_a_non_empty_dim_of_an_empty_tensor():
    # the reduced dim has 3 elements, another dim none: eager gives empty values/indices;
    # the argmin prim refused every empty tensor
    x = torch.rand(4, 3, 0)
    with DecomposeMode():
        values, indices = x.min(dim=1)
    assert values.shape == indices.shape == (4, 0)
    assert indices.dtype == torch.int64
    with pytest.raises(PrimInputError, match="non-zero size"), DecomposeMode():
        torch.rand(4, 0).argmax(1)


@pytest.mark.parametrize(
    ("size", "stride", "offset", "scatters"),
    [
        ((2, 3, 5), (15, 5, 1), 0, False),  # a reshape of all of it: no scatter
        ((30,), (1,), 0, False),
        ((5, 6), (1, 5), 0, True),  # all of it, in another order
        ((2, 3, 4), (15, 5, 1), 0, True),  # not all of it
        ((2, 2, 5), (15, 5, 1), 5, True),
    ],
)
def test_a_write_through_a_reshape_of_all_of_a_tensor_is_no_scatter(size, stride, offset, scatters):
    base, src = torch.randn(6, 5), torch.randn(size)
    with DecomposeMode() as mode:
        got = torch.as_strided_scatter(base, src, size, stride, offset)
    torch.testing.assert_close(got, torch.as_strided_scatter(base, src, size, stride, offset))
    assert (mode.prim_counts["ember_prims.as_strided_scatter.default"] > 0) == scatters
