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


def test_rows_read_across_the_grain_run_with_the_unit_stride_kept_dim_innermost(check):
    # a softmax over proj(x).permute(0, 3, 1, 2) (ConViT's positional scores): each row walks
    # the last dim `heads` apart, the heads are innermost in memory. The kernel's rows run
    # (batch, query, head), so neighbouring rows read neighbouring elements; in storage order
    # (batch, head, query) they were a whole row apart
    b, n, heads = 2, 12, 4
    scores = torch.randn(b, n, n, heads)

    def f(a):
        rows = prims.permute(a, [0, 3, 1, 2])  # (b, heads, n, n), rows `heads` apart
        peak = prims.amax(rows, [3])
        shifted = prims.exp(
            prims.sub(rows, prims.broadcast_in_dim(peak, [b, heads, n, n], [0, 1, 2]))
        )
        return (
            prims.div(
                shifted,
                prims.broadcast_in_dim(prims.sum(shifted, [3]), [b, heads, n, n], [0, 1, 2]),
            ),
        )

    _, sched = check(f, scores, atol=1e-5, rtol=1e-5)
    groups = _reduce_groups(sched)
    assert groups and all([int(s) for s in g.sizes] == [b, n, heads] for g in groups)


def test_rows_read_along_their_grain_keep_the_storage_order(check):
    x = torch.randn(2, 4, 6, 12)
    _, sched = check(lambda a: (prims.amax(a, [3]),), x, atol=1e-5, rtol=1e-5)
    (group,) = _reduce_groups(sched)
    assert [int(s) for s in group.sizes] == [2, 4, 6]
