"""Convolutions on CPU run channels-last: their inputs are stored NHWC, their results are
declared NHWC, and the pointwise / pooling kernels between them follow that layout (loops
with channels innermost). Graph outputs keep eager's strides. Checked against eager."""

import sympy
import torch

from ember_inductor_ir.layout import (
    FixedLayout,
    channels_last_strides,
    is_channels_last,
    stride_order,
)
from ember_inductor_ir.lowering import convolution
from ember_primops import prims


def _conv(x, w):
    return prims.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)


def _conv_relu_pool_conv(x, w1, w2):
    h = prims.abs(_conv(x, w1))
    windows = prims.unfold(prims.unfold(h, 2, 2, 2), 3, 2, 2)  # 2x2 max-pool windows
    pooled = prims.amax(windows, [4, 5])
    return (prims.sum(_conv(pooled, w2), [1, 2, 3]),)


def _inputs():
    return torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(5, 4, 3, 3)


def _extern_args(sched, kernel_name):
    return [g.extern for g in sched if g.extern is not None and g.extern.kernel_name == kernel_name]


def test_convolution_chain_runs_channels_last(check):
    lowering, sched = check(_conv_relu_pool_conv, *_inputs(), atol=1e-4, rtol=1e-4)
    convs = _extern_args(sched, "convolution")
    assert len(convs) == 2
    for conv in convs:
        x = conv.tensor_args()[0]
        layout = x.view or lowering.buffers[x.name].layout
        assert is_channels_last(layout), layout.describe()
        assert is_channels_last(conv.outputs[0].layout)
    # the pooling kernel between the convolutions writes NHWC with channels innermost
    pool = [g for g in sched if not g.is_extern and [int(s) for s in g.reduction_sizes] == [2, 2]]
    assert len(pool) == 1
    assert [int(s) for s in pool[0].sizes] == [2, 4, 4, 4]  # N, H, W, C
    assert lowering.fallback_counts.get("unfold", 0) == 0  # windows are index maps


def test_graph_output_of_a_convolution_keeps_eager_strides(check):
    x, w1, _ = _inputs()
    _, sched = check(lambda a, b: (prims.sum(_conv(a, b), [1, 2, 3]),), x, w1)
    assert is_channels_last(_extern_args(sched, "convolution")[0].outputs[0].layout)
    # a returned feature map (a training forward saving activations) stays contiguous
    _, sched = check(lambda a, b: (prims.exp(_conv(a, b)),), x, w1)
    out = _extern_args(sched, "convolution")[0].outputs[0].layout
    assert out.is_contiguous()


def test_channels_last_can_be_switched_off(check, monkeypatch):
    monkeypatch.setattr(convolution, "CHANNELS_LAST", False)
    _, sched = check(_conv_relu_pool_conv, *_inputs(), atol=1e-4, rtol=1e-4)
    for conv in _extern_args(sched, "convolution"):
        assert conv.outputs[0].layout.is_contiguous()


def test_channels_last_strides():
    assert [int(s) for s in channels_last_strides([2, 3, 4, 5])] == [60, 1, 15, 3]
    assert [int(s) for s in channels_last_strides([2, 3, 4, 5, 6])] == [360, 1, 90, 18, 3]


def test_stride_order():
    def order(size, stride):
        return stride_order(FixedLayout(torch.device("cpu"), torch.float32, size, stride))

    assert order([2, 3, 4, 5], [60, 20, 5, 1]) == [0, 1, 2, 3]
    assert order([2, 3, 4, 5], [60, 1, 15, 3]) == [0, 2, 3, 1]
    assert order([2, 1, 4, 5], [20, 1, 1, 4]) == [0, 1, 3, 2]  # size-1 dim stays put
    assert order([2, 3], [0, 1]) == [0, 1]  # broadcast: logical order
    assert order([2, 3], [sympy.Symbol("s"), 1]) == [0, 1]
