"""Performance-shaped kernels, end to end against eager: softmax computes exp once per element
(kept in a per-row scratch, not in memory), and convolutions run channels-last with the
pointwise/pooling kernels between them iterating channels innermost."""

import torch

from ember_primops import prims


def _softmax(rows, cols):
    def f(a):
        m = prims.broadcast_in_dim(prims.amax(a, [1]), [rows, cols], [0])
        e = prims.exp(prims.sub(a, m))
        s = prims.broadcast_in_dim(prims.sum(e, [1]), [rows, cols], [0])
        return (prims.div(e, s),)

    return f


def test_softmax_computes_exp_once_in_a_row_scratch(check):
    sched, compiled = check(_softmax(64, 256), torch.randn(64, 256), atol=1e-6, rtol=1e-5)
    assert compiled.kernel_count == 1
    source = compiled.cpp_source
    assert source.count("ember::exp(") == 1, source  # 256: lane loops, no scalar tail
    kernel = compiled.kernels[0]
    assert kernel.register_only  # the exp buffer: no whole-tensor allocation
    (scratch,) = [n.buffer.name for n in sched[0].nodes if n.placement == "full"][:1]
    assert f"{scratch}_row[256]" in source
    assert scratch not in {p.buffer for p in kernel.params}
    assert f"{scratch} = _empty" not in compiled.wrapper_source


def test_long_rows_are_not_kept_in_scratch(check):
    _, compiled = check(_softmax(2, 5000), torch.randn(2, 5000), atol=1e-6, rtol=1e-5)
    assert "_row[" not in compiled.cpp_source


def _conv(x, w):
    return prims.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)


def _conv_pool_conv(x, w1, w2):
    h = prims.abs(_conv(x, w1))
    # 3x3 windows, stride 2 (a 2x2 window is a pointwise max of four loads)
    pooled = prims.amax(prims.unfold(prims.unfold(h, 2, 3, 2), 3, 3, 2), [4, 5])
    return (prims.sum(_conv(pooled, w2), [2, 3]),)


def test_convolutions_run_channels_last_between_them(check):
    x, w1, w2 = torch.randn(2, 3, 8, 8), torch.randn(16, 3, 3, 3), torch.randn(8, 16, 3, 3)
    _, compiled = check(_conv_pool_conv, x, w1, w2, atol=1e-4, rtol=1e-4)
    assert "unfold" not in compiled.wrapper_source  # pooling windows are index maps
    pool = [k for k in compiled.kernels if "reduce [3, 3]" in k.code.splitlines()[0]]
    assert len(pool) == 1
    # loops N, H, W, C: the channel loop is innermost and the pooled store is contiguous in it
    assert "loops [2, 3, 3, 16]" in pool[0].code.splitlines()[0], pool[0].code


def test_max_pool_of_nan_and_signed_zero_matches_eager(check):
    x, w = torch.randn(1, 2, 4, 4), torch.randn(4, 2, 3, 3)
    x[0, 1, 1, 1] = float("nan")

    def f(a, b):
        h = _conv(a, b)
        return (
            prims.sum(prims.amax(prims.unfold(prims.unfold(h, 2, 2, 2), 3, 2, 2), [4, 5]), [1]),
        )

    check(f, x, w, atol=1e-5, rtol=1e-5)


def test_float32_exp_is_inline_arithmetic_within_an_ulp_of_eager(check):
    x = torch.cat(
        [
            torch.linspace(-110.0, 95.0, 200_001),
            torch.randn(50_000) * 10,
            torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 88.72, 88.73]),
            torch.tensor([-87.3, -103.9, -104.0, 1e-30, -1e-30]),
        ]
    )
    _, compiled = check(lambda a: (prims.exp(a), prims.sigmoid(a)), x, atol=3e-45, rtol=3e-7)
    assert "std::exp" not in compiled.cpp_source
    # float64 keeps libm
    _, compiled = check(lambda a: (prims.exp(a),), x.double(), atol=0, rtol=1e-15)
    assert "ember::exp(" in compiled.cpp_source  # the double overload calls std::exp


def test_library_externs_call_aten_directly(check):
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    _, compiled = check(lambda x, y: (prims.exp(prims.mm(x, y)),), a, b, atol=1e-5, rtol=1e-5)
    called = [
        v for v in compiled._call.__globals__.values() if isinstance(v, torch._ops.OpOverload)
    ]
    # aten's mm.out through torch.mm(out=), not the prim, which re-checks every call
    assert "_mm_out(arg0, arg1, out=" in compiled.wrapper_source
    assert compiled._call.__globals__["_mm_out"] is torch.mm
    assert torch.ops.ember_prims.mm.default not in called
