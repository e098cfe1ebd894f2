"""Lane-form reductions (emit/lanes.py): float partials per vector lane flushed into double
lanes. Checked against eager on long rows, rows with a tail that is not a whole block,
rows longer than one chunk, the split (per-thread partials) mode and NaN/inf inputs."""

import pytest
import torch

from ember_codegen.cpp.emit.lanes import BYTE_LANES, CHUNK, LANES, MIN_EXTENT
from ember_primops import prims

LANE_LOOP = "#pragma omp simd"


def _all_reductions(dims):
    def f(a):
        vm = prims.var_mean(a, dims, 0.0)
        return (prims.sum(a, dims), prims.amax(a, dims), prims.amin(a, dims), vm[0], vm[1])

    return f


@pytest.mark.parametrize(
    "shape",
    [
        (4, 8 * LANES),  # whole blocks only
        (3, 1000),  # a tail of 8
        (2, CHUNK + 3 * LANES + 5),  # two chunks and a tail
    ],
)
def test_rows_in_lanes_match_eager(check, shape):
    x = torch.randn(*shape) * 3 + 1
    _, compiled = check(_all_reductions([1]), x)
    assert LANE_LOOP in compiled.cpp_source


def test_outer_reduction_dims_flush_per_inner_loop(check):
    # batch-norm statistics: channels outside, (batch, h, w) reduced, w innermost
    x = torch.randn(6, 8, 5, 64) + 4
    _, compiled = check(_all_reductions([0, 2, 3]), x.permute(1, 0, 2, 3))
    assert LANE_LOOP in compiled.cpp_source


@pytest.mark.parametrize("strided", [False, True])
def test_split_mode_lanes(check, strided):
    # one output point, a long reduction: the team shares the chunks of the one reduction
    # loop, or (rows of a strided view: two reduction loops) the outer reduction loop
    x = torch.randn(40, 3, 1000) + 2
    x = x[:, 0, :] if strided else x.reshape(-1)
    dims = list(range(x.dim()))
    _, compiled = check(_all_reductions(dims), x, rtol=1e-5, atol=1e-5)
    assert LANE_LOOP in compiled.cpp_source
    assert "_partials[tid]" in compiled.cpp_source


@pytest.mark.parametrize("shape", [(3, 1000), (2, CHUNK + 3 * LANES + 5)])
def test_float64_sums_run_in_double_lanes(check, shape):
    # batch-norm statistics in eager's float64: double lanes, no float partials, and the
    # float32 mean rounded from the sum equal to eager's (sequential float64) bit for bit
    x = torch.randn(*shape) * 3 + 1
    f64 = torch.float64

    def stats(a):
        total = prims.sum(prims.convert_element_type(a, f64), [1])
        count = prims.scalar_tensor(float(shape[1]), dtype=f64, device=x.device)
        mean = prims.convert_element_type(prims.div(total, count), torch.float32)
        return total, mean

    _, compiled = check(stats, x)
    assert "acc0_w[lane] = acc0_w[lane] + " in compiled.cpp_source
    assert "acc0_l" not in compiled.cpp_source
    ours = compiled([x])[1]
    sequential = torch.tensor([sum(row.double().tolist()) / shape[1] for row in x]).float()
    assert torch.equal(ours, sequential)


def test_short_rows_stay_scalar(check):
    x = torch.randn(8, MIN_EXTENT - 1)
    _, compiled = check(_all_reductions([1]), x)
    assert LANE_LOOP not in compiled.cpp_source


def test_nan_and_inf_propagate_through_lanes(check):
    x = torch.randn(4, 300)
    x[0, 17] = float("nan")
    x[1, 299] = float("nan")  # in the tail
    x[2, 5] = float("inf")
    x[3, 40] = float("-inf")
    check(lambda a: (prims.sum(a, [1]), prims.amax(a, [1]), prims.amin(a, [1])), x)


def _rel_err(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact).abs() / exact.abs().clamp_min(1e-30)).max().item()


def test_long_float32_sum_and_variance_accuracy(compile_prims):
    # 4M values with a large offset: a plain float accumulator would lose ~3 digits here
    x = torch.randn(1 << 22) * 0.5 + 100.0
    _, compiled = compile_prims(lambda a: (prims.sum(a, [0]), prims.var_mean(a, [0], 0.0)[0]), x)
    total, var = compiled([x])
    exact_sum, exact_var = x.double().sum(), x.double().var(correction=0)
    eager_sum_err = _rel_err(x.sum(), exact_sum)
    eager_var_err = _rel_err(x.var(correction=0), exact_var)
    assert _rel_err(total, exact_sum) <= max(2 * eager_sum_err, 2e-7)
    assert _rel_err(var, exact_var) <= max(2 * eager_var_err, 2e-6)


COLUMN_LANES = "const int64_t i"  # the lane's output point inside the column lane loop


@pytest.mark.parametrize(
    "shape",
    [
        (512, 96),  # whole blocks of output points
        (300, 100),  # a tail of 4 output points
    ],
)
def test_column_reductions_run_output_points_as_lanes(check, shape):
    # a bias gradient: sum over rows, the contiguous columns are the output points
    x = torch.randn(*shape) + 1

    def f(a):
        total = prims.sum(a, [0])
        return (total, prims.amax(a, [0]), prims.amin(a, [0]), prims.mul(total, total))

    _, compiled = check(f, x)
    assert "+= 16) {" in compiled.cpp_source and COLUMN_LANES in compiled.cpp_source


def test_column_reduction_with_outer_dims(check):
    # batch-norm style over a channels-last buffer: (n, h*w) reduced, c innermost
    x = torch.randn(4, 50, 48)
    check(lambda a: (prims.sum(a, [1]), prims.amax(a, [1])), x)


def test_row_reductions_are_not_columns(check):
    x = torch.randn(64, 256)
    _, compiled = check(lambda a: (prims.sum(a, [1]),), x)
    assert "ib += 16" not in compiled.cpp_source


def _masked_softmax(rows: int, cols: int):
    cpu = torch.device("cpu")

    def f(x, mask):
        y = prims.where(
            mask, x, prims.scalar_tensor(float("-inf"), dtype=torch.float32, device=cpu)
        )
        e = prims.exp(prims.sub(y, prims.broadcast_in_dim(prims.amax(y, [1]), [rows, cols], [0])))
        total = prims.broadcast_in_dim(prims.sum(e, [1]), [rows, cols], [0])
        return (prims.div(e, total), prims.var_mean(x, [1], 0.0)[0])

    return f


@pytest.mark.parametrize(
    "cols,lanes",
    [
        (8 * BYTE_LANES, BYTE_LANES),  # whole blocks of byte lanes
        (2 * BYTE_LANES + 7, BYTE_LANES),  # a tail
        (2 * BYTE_LANES - 1, LANES),  # too short for two blocks of 64: the float width
    ],
)
def test_rows_loading_bool_masks_run_64_lanes(check, cols, lanes):
    # a uint8-stored bool mask in a 16-lane loop vectorizes 8 wide (GCC picks 8-byte vectors)
    x = torch.randn(6, cols)
    mask = torch.rand(6, cols) > 0.3
    mask[:, 0] = True  # no fully masked row (eager gives NaN there too; not the point here)
    _, compiled = check(_masked_softmax(6, cols), x, mask)
    assert f"lane < {lanes};" in compiled.cpp_source


def test_lanes_fold_pairwise_not_in_a_serial_chain(check):
    # a 128-wide softmax row spent as long folding 64 lanes one by one as on its elements
    x = torch.randn(6, 4 * BYTE_LANES)
    _, compiled = check(_all_reductions([1]), x)
    src = compiled.cpp_source
    for width in (LANES // 2, LANES // 4, 2, 1):
        assert f"for (int l = 0; l < {width}; ++l)" in src and f"_w[l + {width}]" in src
