"""Adjacent reduction dimensions merged into one loop (emit/merged_dims.py): an NCHW plane
reduced as one run takes the lane loop; a transposed plane is walked in its storage order
(the scheduler's reduction order) and merges too; rows of a wider buffer or a pooling window
keep their loops; pointwise ``full`` nodes indexed by the reduction variables are rewritten
too."""

import torch

from ember_primops import prims

LANE_LOOP = "#pragma omp simd"


def _batch_norm_statistics(a):
    # the backward's sums of the cnn: per channel over (n, h, w), each plane 16 x 16
    total = prims.sum(a, [0, 2, 3])
    f64 = torch.float64
    wide = prims.sum(prims.convert_element_type(a, f64), [0, 2, 3])
    return total, wide


def test_nchw_planes_merge_into_one_lane_loop(check):
    x = torch.randn(4, 8, 16, 16) * 2 + 1
    _, compiled = check(_batch_norm_statistics, x)
    source = compiled.cpp_source
    assert "reduce [4, 256]" in source
    assert "reduce [4, 16, 16]" not in source
    assert LANE_LOOP in source  # 16-element rows alone stay scalar (MIN_EXTENT)


def test_transposed_planes_are_walked_in_storage_order(check):
    x = torch.randn(4, 8, 16, 16).permute(0, 1, 3, 2)
    _, compiled = check(lambda a: (prims.sum(a, [0, 2, 3]),), x)
    assert "reduce [4, 256]" in compiled.cpp_source


def test_rows_of_a_wider_buffer_keep_their_loops(check):
    x = torch.randn(4, 8, 16, 40)[..., :16]  # rows of 16, 40 apart: not one run
    _, compiled = check(lambda a: (prims.sum(a, [0, 2, 3]),), x)
    assert "reduce [4, 16, 16]" in compiled.cpp_source


def test_rows_of_stride_two_that_tile_the_plane_merge(check):
    x = torch.randn(4, 8, 16, 32)[..., ::2]  # stride 2, rows 32 apart: one run of stride 2
    _, compiled = check(lambda a: (prims.sum(a, [0, 2, 3]),), x)
    assert "reduce [4, 256]" in compiled.cpp_source


def test_pointwise_full_nodes_follow_the_merged_variable(check):
    # softmax over (h, w): exp(x - max) is a ``full`` node read again by the normalization
    shape = [2, 8, 16, 16]
    x = torch.randn(shape) * 3

    def softmax_hw(a):
        shifted = prims.sub(a, prims.broadcast_in_dim(prims.amax(a, [2, 3]), shape, [0, 1]))
        e = prims.exp(shifted)
        total = prims.broadcast_in_dim(prims.sum(e, [2, 3]), shape, [0, 1])
        return (prims.div(e, total), prims.argmax(prims.reshape(a, [2, 8, 256]), 2))

    _, compiled = check(softmax_hw, x, atol=1e-6, rtol=1e-5)
    assert "reduce [256]" in compiled.cpp_source
