"""Reductions end to end: every reduction type, the three parallel modes (serial, outer
loops, split reduction with per-thread partials), epilogues and Welford."""

import pytest
import torch

from ember_primops import prims


@pytest.mark.parametrize("dims", [[1], [0, 2], [0, 1, 2]])
def test_sum_prod_amax_amin(check, dims):
    x = torch.randn(3, 4, 5)

    def f(a):
        return (prims.sum(a, dims), prims.prod(a, dims), prims.amax(a, dims), prims.amin(a, dims))

    check(f, x, atol=1e-5, rtol=1e-5)


def test_arg_reductions_ties_and_nan(check):
    x = torch.randn(6, 7)
    x[2, 3] = x[2, 5] = 9.0  # ties resolve to the first occurrence
    x[4, 1] = x[4, 6] = float("nan")  # the first NaN wins
    check(lambda a: (prims.argmax(a, 1), prims.argmin(a, 1), prims.argmax(a, 0)), x)


def test_boolean_and_integer_reductions(check):
    x = (torch.rand(4, 6) > 0.3).to(torch.float32)
    i = torch.randint(-1000, 1000, (4, 7))

    def f(a, b):
        return (
            prims.any(a, [1]),
            prims.all(a, [1]),
            prims.all(prims.gt(a, a), [0, 1]),
            prims.sum(b, [1]),
            prims.amax(b, [0]),
            prims.xor_sum(b, [1]),
            prims.argmin(b, 1),
        )

    check(f, x, i)


def test_var_and_var_mean_share_one_welford(check):
    x = torch.randn(5, 9, dtype=torch.float64)

    def f(a):
        vm = prims.var_mean(a, [1], 1.0)
        return (prims.var(a, [0], 0.0), vm[0], vm[1])

    _sched, compiled = check(f, x)
    # mean and m2 of one var_mean come from one accumulator
    assert compiled.cpp_source.count("ember::welford_update") == 2


def test_reduction_epilogue_is_one_kernel(check):
    def f(a):
        vm = prims.var_mean(a, [1], 1.0)
        return (prims.rsqrt(prims.add(vm[0], vm[1])),)

    # positive rows: var + mean stays away from zero, where rsqrt turns one rounding step of
    # the sums into a difference beyond the tolerance (a randn row did in a clean CI run)
    _sched, compiled = check(f, torch.rand(6, 10) + 0.5)
    assert compiled.kernel_count == 1


@pytest.mark.parametrize("shape", [(2, 40000), (1, 70000)])
def test_split_reduction_uses_per_thread_partials(check, shape):
    x = torch.randn(*shape)
    x[0, 12345] = 50.0

    def f(a):
        n = shape[1]
        m = prims.broadcast_in_dim(prims.amax(a, [1]), list(shape), [0])
        e = prims.exp(prims.sub(a, m))
        s = prims.broadcast_in_dim(prims.sum(e, [1]), list(shape), [0])
        vm = prims.var_mean(a, [1], 1.0)
        return (
            prims.div(e, s),
            prims.argmax(a, 1),
            vm[0],
            vm[1],
            prims.sum(prims.mul(a, a), [1]),
            n,
        )

    _, compiled = check(f, x, atol=1e-5, rtol=1e-4)
    assert compiled.kernels[0].mode == "split"
    assert "_partials[tid]" in compiled.cpp_source


def test_outer_parallel_reduction(check):
    x = torch.randn(512, 128)
    _, compiled = check(lambda a: (prims.sum(a, [1]), prims.argmax(a, 1)), x, atol=1e-5, rtol=1e-5)
    assert compiled.kernels[0].mode == "outer"
    assert "#pragma omp parallel for" in compiled.cpp_source


def test_long_float32_sum_stays_within_eager_tolerance(check):
    x = torch.rand(3, 300000) + 1.0
    check(lambda a: (prims.sum(a, [1]), prims.sum(a, [0, 1])), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_reductions(check, dtype):
    x = torch.randn(8, 64).to(dtype)

    def f(a):
        up = prims.convert_element_type(a, torch.float32)
        return (
            prims.sum(a, [1]),
            prims.amax(a, [1]),
            prims.argmax(a, 1),
            prims.convert_element_type(prims.sum(up, [1]), dtype),
        )

    check(f, x)


@pytest.mark.parametrize(
    ("x", "dims", "pragma"),
    [
        # a pooling window: the reduction unrolls, the innermost outer loop vectorizes
        (torch.randn(8, 16, 32, 32, 4), [4], "#pragma omp parallel for collapse(2)\n"),
        # a long reduction per point: only the loops the threads need are collapsed
        (torch.randn(8, 16, 3, 200), [3], "#pragma omp parallel for collapse(2)\n"),
    ],
)
def test_outer_loops_collapse_only_what_threads_need(check, x, dims, pragma):
    _, compiled = check(lambda a: (prims.amax(a, dims),), x)
    assert pragma in compiled.cpp_source


def test_bool_buffers_are_bytes(check):
    # bool loads as uint8 compares (GCC cannot vectorize loads of `bool`)
    x, mask = torch.randn(64, 128), torch.rand(64, 128) > 0.5
    _, compiled = check(
        lambda a, m: (prims.where(m, a, prims.neg(a)), prims.bitwise_not(m)), x, mask
    )
    assert "const uint8_t* EMBER_RESTRICT" in compiled.cpp_source
