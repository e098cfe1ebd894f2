"""A linear layer's bias in BLAS's epilogue: ``bias + a @ b`` whose sum only the output or
library kernels read is one ``torch.addmm(bias, a, b, out=)`` call and no bias kernel; a sum
that a pointwise op reads keeps the mm and its fused bias kernel (add_folds)."""

import torch

from ember_primops import prims


def _linear(x, w, b):  # (8, 16) @ (16, 4) + (4,)
    return prims.add(prims.mm(x, w), prims.broadcast_in_dim(b, [8, 4], [1]))


def _inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return [t.to(dtype) for t in (torch.randn(8, 16), torch.randn(16, 4), torch.randn(4))]


def test_a_linear_output_is_one_addmm_call(check):
    _, compiled = check(lambda x, w, b: (_linear(x, w, b),), *_inputs(), atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == 0 and compiled.native_calls == 0  # no bias kernel
    assert compiled.wrapper_source.count("_addmm_out(arg2, arg0, arg1, out=") == 1
    assert "_mm_out" not in compiled.wrapper_source


def test_float64_linear_equals_eager_addmm(check):
    x, w, b = _inputs(torch.float64)
    _, compiled = check(lambda x, w, b: (_linear(x, w, b),), x, w, b)
    torch.testing.assert_close(compiled([x, w, b])[0], torch.addmm(b, x, w))


def test_a_linear_read_by_a_pointwise_op_keeps_the_fused_bias_kernel(check):
    def f(x, w, b):
        return (prims.tanh(_linear(x, w, b)),)

    _, compiled = check(f, *_inputs(), atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == 1  # bias + tanh: the kernel runs anyway
    assert "_mm_out(" in compiled.wrapper_source and "_addmm_out" not in compiled.wrapper_source


def test_the_addmm_result_reuses_a_dead_buffer_and_feeds_the_next_matmul(check):
    def f(x, w, b, w2):
        h = prims.exp(x)  # dead after the first product: its storage is free for later
        y = _linear(h, w, b)
        return (prims.mm(y, w2),)

    x, w, b = _inputs()
    _, compiled = check(f, x, w, b, torch.randn(4, 4), atol=1e-4, rtol=1e-4)
    assert "_addmm_out(arg2, " in compiled.wrapper_source
    assert compiled.kernel_count == 1  # the exp
