"""Bugs the OpInfo sweep through backend="inductor" found, each reduced to its prims."""

import torch

from ember_primops import prims


def test_padded_rows_of_a_block_diagonal(check):
    # block_diag of [1], [2], [3]: the second block's load index simplified to (i1 - 3) % 2,
    # which C++'s truncating % takes to a negative offset (the loop IR promises the printer
    # non-negative operands).
    def f(a, b, c):
        rows = [
            prims.pad(prims.reshape(a, [1, 1]), 0.0, [0, 0], [0, 5], [0, 0]),
            prims.pad(prims.reshape(b, [1, 2]), 0.0, [0, 1], [0, 3], [0, 0]),
            prims.pad(prims.reshape(c, [1, 3]), 0.0, [0, 3], [0, 0], [0, 0]),
        ]
        return (prims.cat(rows, 0),)

    check(f, torch.randn(1), torch.randn(2), torch.randn(3))


def test_reshape_of_an_empty_tensor(check):
    def f(a):
        return (prims.reshape(prims.exp(a), [0, 5]),)

    check(f, torch.randn(5, 0, 0))


def test_storage_behind_a_fallback_view_is_not_reused(check):
    # max_pool1d with two samples in one graph: the fallback unfold's output is a view of an
    # earlier buffer, whose storage was handed to a later buffer while the view was live.
    def f(x, y):
        u = prims.unfold(prims.exp(x), 0, 3, 3)
        v = prims.unfold(prims.sin(y), 0, 3, 3)
        return (prims.add(u, v),)

    check(f, torch.randn(3), torch.randn(3))


def test_complex_pointwise_runs_as_a_fallback(check):
    # fft.* with norm="ortho": the C++ target has no complex types.
    def f(x):
        c = prims.fft_r2c(x, [0], True)
        return (prims.mul(c, c),)

    check(f, torch.randn(8))
