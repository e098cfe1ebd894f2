"""Reduction lowerings vs eager."""

import pytest
import torch

from ember_inductor_ir.lowering.reductions import UNROLL_MAX
from ember_primops import prims


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dims", [[1], [0, 2], [0, 1, 2], []])
def test_simple_reductions(check, name, dims):
    op = getattr(prims, name)
    x = torch.randn(3, 4, 5)
    check(lambda a: (op(a, dims),), x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(check, name):
    x = torch.randn(6, 7)
    x[2, 3] = x[2, 5]  # ties resolve to the first occurrence, as in eager
    op = getattr(prims, name)
    check(lambda a: (op(a, 1), op(a, 0)), x)


@pytest.mark.parametrize("name", ["any", "all"])
def test_boolean_reductions(check, name):
    x = (torch.rand(4, 6) > 0.3).to(torch.float32)
    op = getattr(prims, name)
    check(lambda a: (op(a, [1]), op(prims.gt(a, a), [0, 1])), x)


def test_var_and_var_mean(check):
    x = torch.randn(5, 9)

    def f(a):
        vm = prims.var_mean(a, [0], 0.0)
        return (prims.var(a, [1], 1.0), vm[0], vm[1])

    check(f, x, atol=1e-5)


def test_xor_sum(check):
    x = torch.randint(0, 1000, (4, 7))
    check(lambda a: (prims.xor_sum(a, [1]),), x)


def test_output_also_read_inline_by_an_earlier_reduction(check):
    """A graph output that an earlier node already reads inline (an activation saved for
    backward that also feeds the loss): the earlier reader must not load a buffer that is
    written after it."""

    def f(a):
        y = prims.mul(a, a)
        return (prims.sum(y, [1]), y)

    check(f, torch.randn(4, 6))


def test_var_and_var_mean_of_no_elements_are_nan(check):
    def f(a):
        vm = prims.var_mean(a, [0], 1.0)
        return (prims.var(a, [0], 0.0), vm[0], vm[1])

    check(f, torch.randn(0))


def _reductions(lowering):
    return [b for b in lowering.buffers.values() if hasattr(b, "data") and b.is_reduction()]


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
def test_a_reduction_over_a_few_elements_is_a_pointwise_body(check, name):
    op = getattr(prims, name)
    lowering, _ = check(lambda a: (op(a, [1]),), torch.randn(5, UNROLL_MAX), atol=1e-5)
    assert not _reductions(lowering)
    lowering, _ = check(lambda a: (op(a, [1]),), torch.randn(5, UNROLL_MAX + 1), atol=1e-5)
    assert len(_reductions(lowering)) == 1


def test_an_unrolled_bfloat16_sum_accumulates_in_float32(check):
    # 1 + 2^-9 rounds back to 1 in bfloat16: added one at a time in bfloat16, the seven small
    # terms vanish; eager (and a reduction kernel) sums in float32 and rounds once
    x = torch.full((3, 8), 2.0**-9, dtype=torch.bfloat16)
    x[:, 0] = 1.0
    lowering, _ = check(lambda a: (prims.sum(a, [1]),), x, atol=0, rtol=0)
    assert not _reductions(lowering)


def test_an_unrolled_max_propagates_nan(check):
    x = torch.randn(4, 3)
    x[1, 2] = float("nan")
    check(lambda a: (prims.amax(a, [1]), prims.amin(a, [1])), x)


def test_a_sum_over_two_halves_is_computed_inline_by_the_mean_reading_it(check):
    # ResNeSt's radix sum read by the mean over H x W: one reduction kernel, no feature map
    # written between them
    x = torch.randn(2, 2, 4, 5, 5)

    def f(a):
        total = prims.sum(a, [1])
        return (prims.sum(total, [2, 3]),)

    lowering, _ = check(f, x, atol=1e-5)
    assert [[int(s) for s in b.get_size()] for b in _reductions(lowering)] == [[2, 4]]
    assert not [b for b in lowering.buffers.values() if len(b.get_size()) == 4]


def test_a_small_reduction_to_one_element_stays_a_reduction(check):
    # a loss's sum over a batch of six: the kernel that reduces each row can reduce them too
    lowering, _ = check(lambda a: (prims.sum(prims.amax(a, [1]), [0]),), torch.randn(6, 12))
    assert len(_reductions(lowering)) == 2
