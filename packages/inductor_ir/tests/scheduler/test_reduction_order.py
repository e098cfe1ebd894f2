"""A reduction over several dims walks them in the order its loads are laid out in memory: a
group norm's statistics over channels-last C, H, W walk H, W, then C, so consecutive
elements of the row are neighbours in memory (the logical order loaded them C apart: a split
reduction's programs read across the grain, 0.72 ms a norm in poolformer on the H200)."""

import torch

from ember_primops import prims


def _reduce_groups(sched):
    return [g for g in sched if not g.is_extern and g.reduction_sizes]


def test_row_over_channels_last_dims_walks_storage_order(check):
    x = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)

    def f(a):
        grouped = prims.reshape(a, [2, 1, 8, 5, 6])
        var, mean = prims.var_mean(grouped, [2, 3, 4], 0.0)
        return var, mean, prims.sum(grouped, [2, 3, 4])

    _, sched = check(f, x, atol=1e-5, rtol=1e-5)
    (group,) = _reduce_groups(sched)
    assert [int(s) for s in group.reduction_sizes] == [5, 6, 8]  # H, W, then C


def test_contiguous_rows_and_arg_reductions_keep_the_logical_order(check):
    nchw = torch.randn(2, 8, 5, 6)
    _, sched = check(lambda a: (prims.sum(a, [1, 2, 3]),), nchw, atol=1e-5, rtol=1e-5)
    (group,) = _reduce_groups(sched)
    assert [int(s) for s in group.reduction_sizes] == [8, 5, 6]
    # an arg reduction's index follows the walk: it keeps the logical order
    nhwc = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)
    flat = lambda a: (prims.argmax(prims.reshape(a, [2, 240]), 1),)  # noqa: E731
    _, sched = check(flat, nhwc)
    assert all(len(g.reduction_sizes) == 1 for g in _reduce_groups(sched))
