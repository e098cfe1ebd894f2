"""Views, masked shape ops, gathers, random numbers, extern kernels and fallbacks end to end."""

import pytest
import torch

from ember_codegen import KernelRuntimeError
from ember_primops import prims


def test_view_chain(check):
    def f(a):
        v = prims.permute(a, [1, 0])
        v = prims.slice(v, [1, 0], [5, 4], [2, 1])
        v = prims.expand_dims(v, [0])
        v = prims.broadcast_in_dim(prims.squeeze(v, [0]), [3, 2, 4], [1, 2])
        v = prims.reshape(v, [6, 4])
        return (prims.add(v, v),)

    check(f, torch.randn(4, 6))


def test_reshape_split_collapse_as_strided_rev(check):
    def f(a):
        flat = prims.reshape(prims.exp(a), [24])
        s = prims.split_dim(a, 1, 2)
        c = prims.collapse_view(s, 0, 2)
        st = prims.as_strided(a, [3, 3], [6, 2], 1)
        return (
            prims.reshape(prims.add(flat, flat), [4, 6]),
            flat,
            prims.neg(c),
            prims.neg(st),
            prims.rev(prims.sin(a), [0]),
        )

    check(f, torch.randn(4, 6))


def test_outputs_that_are_views_and_non_contiguous_inputs(check):
    x = torch.randn(6, 4).t()  # non-contiguous example input

    def f(a):
        return (prims.permute(a, [1, 0]), prims.cos(a), prims.slice(a, [0, 1], [4, 5], [1, 2]))

    _, compiled = check(f, x)
    # a contiguous tensor at call time has other strides: copied to the baked-in layout
    y = torch.randn(4, 6)
    got = compiled([y])
    torch.testing.assert_close(got[1], torch.cos(y))
    with pytest.raises(Exception, match="compiled for"):
        compiled([torch.randn(5, 6)])


def test_input_with_storage_offset(check):
    base = torch.randn(10, 8)
    x = base[2:6, 1:7]  # offset view
    _, compiled = check(lambda a: (prims.mul(a, a), prims.permute(a, [1, 0])), x)
    other = torch.randn(20, 8)[5:9, 0:6]  # same strides, another offset
    torch.testing.assert_close(compiled([other])[0], other * other)
    torch.testing.assert_close(compiled([other])[1], other.t())


def test_cat_pad_slice_scatter(check):
    a, b, c = torch.randn(2, 3), torch.randn(4, 3), torch.randn(1, 3)

    def f(x, y, z):
        return (
            prims.cat([x, y, z], 0),
            prims.cat([x, x], 1),
            prims.pad(x, 1.5, [1, -1], [2, 1], [0, 1]),
            prims.slice_scatter(y, x, 0, 0, 4, 2),
        )

    check(f, a, b, c)


def test_gather_index_select_index(check):
    a = torch.randn(5, 6)
    idx = torch.randint(0, 5, (3, 6))
    sel = torch.tensor([4, 0, 2])
    rows, cols = torch.tensor([0, -1, 1]), torch.tensor([[3], [0]])  # index wraps negatives

    def f(x, i, s, r, c):
        return (
            prims.gather(x, 0, i),
            prims.index_select(x, 1, s),
            prims.index(x, [r]),
            prims.index(x, [None, s]),
            prims.index(x, [c, r]),
        )

    check(f, a, idx, sel, rows, cols)


def test_out_of_range_index_raises_instead_of_reading_memory(compile_prims):
    a, i = torch.randn(5, 6), torch.tensor([0, 2, 4])
    _, compiled = compile_prims(lambda x, s: (prims.index_select(x, 0, s),), a, i)
    torch.testing.assert_close(compiled([a, i])[0], a[i])
    with pytest.raises(KernelRuntimeError, match="IndexError"):
        compiled([a, torch.tensor([0, 7, 1])])


def test_random_bits_and_uniform_are_bit_exact(check):
    seed = torch.tensor(1234, dtype=torch.int64)

    def f(s):
        cpu = torch.device("cpu")
        return (
            prims.uniform([5, 7], s, 3, dtype=torch.float32, device=cpu),
            prims.uniform([4], s, 0, dtype=torch.float16, device=cpu),
            prims.uniform([40000], s, 9, dtype=torch.bfloat16, device=cpu),
            prims.uniform([6], s, 2, dtype=torch.float64, device=cpu),
            prims.random_bits([2, 5], s, 0, device=cpu),
        )

    check(f, seed, atol=0, rtol=0)


def test_normal_matches_the_reference_to_an_ulp(check):
    # Box-Muller goes through log/cos: libm and eager's vector math may differ by an ulp.
    seed = torch.tensor(99, dtype=torch.int64)

    def f(s):
        cpu = torch.device("cpu")
        return (
            prims.normal([3, 3], s, 11, dtype=torch.float32, device=cpu),
            prims.normal([6], s, 2, dtype=torch.float64, device=cpu),
        )

    check(f, seed)


def test_mm_bias_relu_calls_the_extern_and_fuses_the_epilogue(check):
    x, w, b = torch.randn(4, 5), torch.randn(3, 5), torch.randn(3)

    def f(a, weight, bias):
        h = prims.mm(a, prims.permute(weight, [1, 0]))
        h = prims.add(h, prims.broadcast_in_dim(bias, [4, 3], [1]))
        return (
            prims.maximum(
                h, prims.full([4, 3], 0.0, dtype=torch.float32, device=torch.device("cpu"))
            ),
        )

    sched, compiled = check(f, x, w, b, atol=1e-5, rtol=1e-5)
    assert [g.extern.kernel_name for g in sched if g.extern is not None] == ["mm"]
    assert compiled.kernel_count == 1


def test_bmm_and_convolution(check):
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)

    def f(p, q, img, weight):
        conv = prims.convolution(img, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        return (prims.exp(prims.bmm(p, q)), prims.sigmoid(conv))

    check(f, a, b, x, w, atol=1e-4, rtol=1e-4)


def test_prim_without_lowering_is_a_counted_fallback(check):
    x = torch.rand(3, 4) + 0.5
    _, compiled = check(lambda a: (prims.add(prims.digamma(a), a),), x)
    assert compiled.fallback_counts == {"digamma": 1}
    assert "(fallback)" in compiled.wrapper_source
