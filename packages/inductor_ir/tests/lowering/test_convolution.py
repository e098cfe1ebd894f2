"""Convolutions run channels-last where the target's policy says so (channels_last.py):
their inputs are stored NHWC, their results are declared NHWC, and the pointwise / pooling
kernels between them follow that layout (loops with channels innermost). Graph outputs keep
eager's strides, except a training forward's saved activations (saved_layouts.py), which
cross to the backward NHWC. Checked against eager."""

import pytest
import sympy
import torch

from conftest import FUSING_GPU, LIBRARY_CPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_inductor_ir.channels_last import channels_last_policy
from ember_inductor_ir.handlers.readwrite import ReadWriteHandler
from ember_inductor_ir.indexing import index_vars
from ember_inductor_ir.layout import (
    FixedLayout,
    channels_last_strides,
    is_channels_last,
    stride_order,
    walk_format,
)
from ember_inductor_ir.lowering.reductions import UNROLL_MAX
from ember_inductor_ir.nodes import Pointwise
from ember_inductor_ir.saved_layouts import keep_saved_channels_last, predicted_channels_last
from ember_primops import prims


def _conv(x, w):
    return prims.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)


def _conv_relu_pool_conv(x, w1, w2):
    h = prims.abs(_conv(x, w1))
    # 3x3 max-pool windows, stride 2 (a 2x2 window is a pointwise max of four loads)
    windows = prims.unfold(prims.unfold(h, 2, 3, 2), 3, 3, 2)
    pooled = prims.amax(windows, [4, 5])
    return (prims.sum(_conv(pooled, w2), [1, 2, 3]),)


def _inputs():
    return torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(5, 4, 3, 3)


def _extern_args(sched, kernel_name):
    """The library calls of ``kernel_name`` in program order (the schedule may run them in
    another order where that lowers its memory peak)."""
    found = [
        g.extern for g in sched if g.extern is not None and g.extern.kernel_name == kernel_name
    ]
    return sorted(found, key=lambda e: int(e.name.removeprefix("extern")))


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
    pool = [g for g in sched if not g.is_extern and [int(s) for s in g.reduction_sizes] == [3, 3]]
    assert len(pool) == 1
    assert [int(s) for s in pool[0].sizes] == [2, 3, 3, 4]  # N, H, W, C
    assert lowering.fallback_counts.get("unfold", 0) == 0  # windows are index maps


def test_graph_output_of_a_convolution_keeps_eager_strides(check):
    x, w1, _ = _inputs()
    _, sched = check(lambda a, b: (prims.sum(_conv(a, b), [1, 2, 3]),), x, w1)
    assert is_channels_last(_extern_args(sched, "convolution")[0].outputs[0].layout)
    # a returned feature map (a training forward saving activations) stays contiguous
    _, sched = check(lambda a, b: (prims.exp(_conv(a, b)),), x, w1)
    out = _extern_args(sched, "convolution")[0].outputs[0].layout
    assert out.is_contiguous()


def test_a_cast_weight_is_stored_channels_last_beside_a_channels_last_input(check):
    # autocast's cast of a 3x3 weight writes it NHWC: the library takes the weight in the
    # input's memory format, and aten copied a contiguous one on every call. A parameter
    # read as it is stays as the caller passed it.
    def fn(x, w1, w2):
        cast = prims.convert_element_type(w1, torch.float64)
        h = _conv(prims.convert_element_type(x, torch.float64), cast)
        return (prims.sum(_conv(prims.convert_element_type(h, torch.float32), w2), [1, 2, 3]),)

    lowering, sched = check(fn, *_inputs(), atol=1e-4, rtol=1e-4)
    first, second = _extern_args(sched, "convolution")
    cast_weight = first.tensor_args()[1]
    assert is_channels_last(lowering.buffers[cast_weight.name].layout)
    assert second.tensor_args()[1].name in lowering.graph_inputs


def test_channels_last_can_be_switched_off(check, monkeypatch):
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "0")
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


def test_policy_per_target_and_override(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    cpu, gpu = channels_last_policy(LIBRARY_CPU), channels_last_policy(FUSING_GPU)
    assert cpu is LIBRARY_CPU.channels_last and gpu is FUSING_GPU.channels_last
    assert cpu.allows(returns_feature_maps=False) and gpu.allows(returns_feature_maps=True)
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "1")
    assert channels_last_policy(LIBRARY_CPU).allows(returns_feature_maps=True)
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "inference")
    assert not channels_last_policy(FUSING_GPU).allows(returns_feature_maps=True)
    assert channels_last_policy(FUSING_GPU).allows(returns_feature_maps=False)
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "0")
    assert not channels_last_policy(FUSING_GPU).allows(returns_feature_maps=False)
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "sometimes")
    with pytest.raises(ValueError, match="EMBER_CHANNELS_LAST"):
        channels_last_policy(LIBRARY_CPU)


def _lower_and_run(gm, inputs, target):
    lowering = lower(gm, inputs, target=target)
    sched = schedule(lowering)
    return lowering, sched, run_scheduled(sched, inputs)


def _assert_eager(got, want):
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got.stride() == want.stride(), (got.stride(), want.stride())


@pytest.mark.parametrize("target", [LIBRARY_CPU, FUSING_GPU], ids=["cpu", "gpu"])
def test_returned_feature_maps_follow_the_target_policy(target, monkeypatch):
    """The GPU's code generator runs a graph that returns a convolution's feature map (a
    training graph) channels-last and copies the output to eager's strides; the CPU's keeps
    such graphs NCHW (measured slower to train channels-last there)."""
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()

    def fn(a, b):
        return (prims.exp(_conv(a, b)),)

    _, sched, got = _lower_and_run(prim_graph(fn, x, w1), [x, w1], target)
    conv = _extern_args(sched, "convolution")[0]
    assert is_channels_last(conv.outputs[0].layout) == (target is FUSING_GPU)
    _assert_eager(got[0], fn(x, w1)[0])


def _training_pair(x, w):
    """A forward returning (loss, saved conv output) and a backward reading the saved value
    and returning a 4-d gradient, as the partitioner splits a training graph."""

    def forward(a, b):
        c = _conv(a, b)
        return prims.sum(prims.abs(c), [0, 1, 2, 3]), c

    shape = [x.shape[0], w.shape[0], *x.shape[2:]]

    def backward(c, g):
        return (prims.mul(c, prims.broadcast_in_dim(g, shape, [])),)

    c = forward(x, w)[1]
    g = torch.tensor(2.0)
    return forward, backward, prim_graph(forward, x, w), prim_graph(backward, c, g), c, g


def test_saved_activations_cross_to_the_backward_channels_last(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()
    forward, backward, fw, bw, c, g = _training_pair(x, w1)
    assert keep_saved_channels_last(fw, bw, 1, 1, FUSING_GPU) == 1
    saved = bw.graph.find_nodes(op="placeholder")[0].meta["val"]
    assert saved.is_contiguous(memory_format=torch.channels_last)
    # the forward returns the convolution's own NHWC result: no copy kernel
    lowering, sched, got = _lower_and_run(fw, [x, w1], FUSING_GPU)
    conv = _extern_args(sched, "convolution")[0]
    assert lowering.graph_outputs[1].name == conv.outputs[0].name
    result = conv.outputs[0].name
    assert not [k for k in sched if result in k.reads and not k.reduction_sizes]  # no copy
    torch.testing.assert_close(got[0], forward(x, w1)[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got[1], c, atol=1e-4, rtol=1e-4)
    assert got[1].stride() == tuple(saved.stride())
    # the backward, compiled for those strides, returns its gradient with eager's strides
    _, _, grads = _lower_and_run(bw, [got[1], g], FUSING_GPU)
    _assert_eager(grads[0], backward(c, g)[0])


def test_a_saved_alias_of_an_nhwc_value_crosses_channels_last(monkeypatch):
    # the min-cut may take a view_of alias of the convolution's result as the saved value
    # (equal bytes); it is the same tensor, stored NHWC: ESE-VoVNet's depthwise outputs
    # crossed through NCHW copies (28 of the forward's 345 planned kernels at a small size)
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()

    def forward(a, b):
        c = _conv(a, b)
        return prims.sum(prims.abs(c), [0, 1, 2, 3]), prims.view_of(c)

    _, backward, _, bw, c, g = _training_pair(x, w1)
    fw = prim_graph(forward, x, w1)
    assert keep_saved_channels_last(fw, bw, 1, 1, FUSING_GPU) == 1
    saved = bw.graph.find_nodes(op="placeholder")[0].meta["val"]
    assert saved.is_contiguous(memory_format=torch.channels_last)
    lowering, sched, got = _lower_and_run(fw, [x, w1], FUSING_GPU)
    conv = _extern_args(sched, "convolution")[0]
    assert lowering.graph_outputs[1].name == conv.outputs[0].name  # no copy kernel
    assert got[1].stride() == tuple(saved.stride())
    _, _, grads = _lower_and_run(bw, [got[1], g], FUSING_GPU)
    _assert_eager(grads[0], backward(c, g)[0])


def test_a_saved_integer_map_crosses_channels_last_too(monkeypatch):
    # a max pool's window offsets (int8) or a ReLU's mask, saved beside NHWC activations:
    # stored NCHW, the backward's gathers beside NHWC gradients read them element by element
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()

    def forward(a, b):
        c = _conv(a, b)
        windows = prims.unfold(prims.unfold(c, 2, 2, 2), 3, 2, 2)  # [2, 4, 4, 4, 2, 2]
        flat = prims.reshape(windows, [2, 4, 4, 4, 4])
        offsets = prims.convert_element_type(prims.argmax(flat, 4), torch.int8)
        return prims.sum(prims.abs(c), [0, 1, 2, 3]), offsets

    def backward(offsets, g):
        wide = prims.convert_element_type(offsets, torch.float32)
        return (prims.mul(wide, prims.broadcast_in_dim(g, [2, 4, 4, 4], [])),)

    offsets = forward(x, w1)[1]
    g = torch.tensor(2.0)
    fw, bw = prim_graph(forward, x, w1), prim_graph(backward, offsets, g)
    assert keep_saved_channels_last(fw, bw, 1, 1, FUSING_GPU) == 1
    saved = bw.graph.find_nodes(op="placeholder")[0].meta["val"]
    assert saved.dtype == torch.int8 and saved.is_contiguous(memory_format=torch.channels_last)
    _, _, got = _lower_and_run(fw, [x, w1], FUSING_GPU)
    assert torch.equal(got[1], offsets) and got[1].stride() == tuple(saved.stride())
    _, _, grads = _lower_and_run(bw, [got[1], g], FUSING_GPU)
    _assert_eager(grads[0], backward(offsets, g)[0])


def _gather_then_statistic(x, w, rows, cols):
    """A convolution's NHWC map gathered at other spatial points (as a max pool's backward
    gathers its windows' gradients), read broadcast four times over: a broadcast gather
    is stored once (graph.py's HEAVY_BROADCAST_MIN)."""
    c = _conv(x, w)
    y = prims.index(c, [None, None, rows, cols])  # [2, 4, 8, 8]
    wide = prims.broadcast_in_dim(y, [2, 4, 8, 8, 4], [0, 1, 2, 3])
    return (prims.sum(prims.mul(wide, wide), [4]),)


def test_a_gathered_map_is_stored_in_the_layout_of_what_it_gathers(monkeypatch):
    # its walk over the gathered dims is unknown (indirect), so the NHWC map it reads votes
    # by its layout: stored NCHW, the per-channel reduction over it read one of the two
    # maps element by element (ResNet-50's stem pool backward beside its batch norm's)
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()
    rows = torch.tensor([7, 0, 1, 2, 3, 4, 5, 6]).reshape(8, 1)
    cols = torch.tensor([1, 2, 3, 4, 5, 6, 7, 0]).reshape(1, 8)
    gm = prim_graph(_gather_then_statistic, x, w1, rows, cols)
    lowering, _, got = _lower_and_run(gm, [x, w1, rows, cols], FUSING_GPU)
    _assert_eager(got[0], _gather_then_statistic(x, w1, rows, cols)[0])
    gathered = [
        b for b in lowering.buffers.values()
        if isinstance(getattr(b, "data", None), Pointwise)
        and "indirect" in str(_reads(b)) and len(b.layout.size) == 4
    ]  # fmt: skip
    assert gathered and all(is_channels_last(b.layout) for b in gathered), gathered


def _reads(buffer):
    rw = ReadWriteHandler()
    buffer.data.inner_fn(rw, index_vars("i", len(buffer.data.get_size())))
    return rw.reads


def test_cpu_training_graphs_stay_nchw_unless_forced(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1, _ = _inputs()
    _, _, fw, bw, _, _ = _training_pair(x, w1)
    before = (fw.code, bw.code)
    assert keep_saved_channels_last(fw, bw, 1, 1, LIBRARY_CPU) == 0
    assert (fw.code, bw.code) == before
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "1")
    assert keep_saved_channels_last(fw, bw, 1, 1, LIBRARY_CPU) == 1
    assert "copy_strided" in fw.code and "copy_strided" in bw.code  # bw: gradient pinned


def test_prediction_follows_the_layout_through_pointwise_and_pools():
    x, w1, w2 = _inputs()
    gm = prim_graph(_conv_relu_pool_conv, x, w1, w2)
    predicted = {n.name.removesuffix("_default") for n in predicted_channels_last(gm)}
    assert predicted == {"convolution", "abs", "amax", "convolution_default_1"}, predicted


def test_returned_nhwc_result_reads_with_eager_strides_on_unit_dims(monkeypatch):
    """A [N, C, 1, 1] NHWC result is the same memory as eager's NCHW one: returned without a
    copy, with eager's strides on the size-1 dims too (a 1x1 weight gradient, say)."""
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w1 = torch.randn(2, 3, 3, 3), torch.randn(4, 3, 3, 3)

    def fn(a, b):
        return (prims.convolution(a, b, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),)

    lowering, sched, got = _lower_and_run(prim_graph(fn, x, w1), [x, w1], FUSING_GPU)
    conv = _extern_args(sched, "convolution")[0]
    assert lowering.graph_outputs[0].name == conv.outputs[0].name  # no copy
    _assert_eager(got[0], fn(x, w1)[0])


def _conv_backward(g, x, w, mask):
    # a first convolution's backward: its input is data; the gradient reaching it is
    # computed from contiguous values (as a batch-norm backward's is)
    grad = prims.mul(g, g)
    return prims.convolution_backward(
        grad, x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, list(mask)
    )


def _weight_gradient(g, x, w):
    return (_conv_backward(g, x, w, (False, True, False))[1],)


def _both_gradients(g, x, w):
    out = _conv_backward(g, x, w, (True, True, False))
    return out[0], out[1]


def _weight_gradient_inputs():
    return torch.randn(2, 4, 8, 8), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)


def test_a_weight_only_gradient_runs_channels_last_on_the_cpu(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    inputs = list(_weight_gradient_inputs())
    (want,) = _weight_gradient(*inputs)
    lowering, sched, (got,) = _lower_and_run(
        prim_graph(_weight_gradient, *inputs), inputs, LIBRARY_CPU
    )
    _assert_eager(got, want)
    (conv,) = _extern_args(sched, "convolution_backward")
    grad, x = conv.tensor_args()[:2]
    for arg in (grad, x):
        assert is_channels_last(arg.view or lowering.buffers[arg.name].layout)
    # the gradient is computed in its inputs' (contiguous) order and stored NHWC
    (square,) = [g for g in sched if grad.name in g.buffer_names()]
    assert [int(s) for s in square.sizes] == [2, 4, 8, 8]
    assert not lowering.buffers[grad.name].layout.is_contiguous()


def test_weight_and_input_gradients_stay_nchw_on_the_cpu(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)

    inputs = list(_weight_gradient_inputs())
    want = _both_gradients(*inputs)
    _, sched, got = _lower_and_run(prim_graph(_both_gradients, *inputs), inputs, LIBRARY_CPU)
    for g, w in zip(got, want, strict=True):
        _assert_eager(g, w)
    (conv,) = _extern_args(sched, "convolution_backward")
    assert all(o.layout.is_contiguous() for o in conv.outputs if o is not None)


def test_weight_only_gradients_follow_the_inference_override(monkeypatch):
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "inference")
    inputs = list(_weight_gradient_inputs())
    _, sched, _ = _lower_and_run(prim_graph(_weight_gradient, *inputs), inputs, LIBRARY_CPU)
    (conv,) = _extern_args(sched, "convolution_backward")
    assert all(o.layout.is_contiguous() for o in conv.outputs if o is not None)


def _relu_of_normalized(x, mean, invstd, w, g):
    """A training backward's recomputed ReLU of a batch norm: its (1, C, 1, 1) statistics
    must not outvote the NHWC feature map it is computed from."""
    y = prims.mul(prims.sub(x, mean), invstd)
    for _ in range(4):  # a body worth storing once (two batch norms and an add, in ResNet)
        y = prims.add(prims.mul(prims.sub(y, mean), invstd), y)
    zero = prims.scalar_tensor(0.0, dtype=torch.float32, device=torch.device("cpu"))
    relu = prims.where(prims.le(y, zero), zero, y)
    per_channel = prims.sum(prims.mul(relu, g), [0, 2, 3])
    return _conv(prims.view_of(relu), w), per_channel  # the backward's input: an alias


def test_per_channel_statistics_do_not_outvote_a_channels_last_feature_map(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x = torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)
    g = torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)
    mean, invstd = torch.randn(1, 4, 1, 1), torch.rand(1, 4, 1, 1) + 0.5
    w = torch.randn(5, 4, 3, 3)
    inputs = [x, mean, invstd, w, g]
    lowering, sched, got = _lower_and_run(
        prim_graph(_relu_of_normalized, *inputs), inputs, FUSING_GPU
    )
    conv = _extern_args(sched, "convolution")[0]
    arg = conv.tensor_args()[0]
    assert is_channels_last(arg.view or lowering.buffers[arg.name].layout)
    # every feature map the graph stores is NHWC: no NCHW ReLU beside an NHWC copy of it
    stored = [
        b.layout
        for name, b in lowering.buffers.items()
        if not name.startswith("arg") and list(b.layout.size) == [2, 4, 6, 6]
    ]
    assert stored and all(is_channels_last(layout) for layout in stored), [
        layout.describe() for layout in stored
    ]
    want = _relu_of_normalized(x, mean, invstd, w, g)
    torch.testing.assert_close(got[0], want[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got[1], want[1], atol=1e-4, rtol=1e-4)


def _depthwise_then_nhwc_norm_and_linear(x, w_dw, w_fc):
    """ConvNeXt's block head: a depthwise convolution, a permute to NHWC, a normalization
    over channels (here a plain centring, to keep the graph small) and a Linear on NHWC."""
    y = prims.convolution(x, w_dw, None, [1, 1], [3, 3], [1, 1], False, [0, 0], 4)
    nhwc = prims.permute(y, [0, 2, 3, 1])
    centred = prims.sub(nhwc, prims.expand_dims(prims.sum(nhwc, [3]), [3]))
    rows = prims.reshape(centred, [2 * 6 * 6, 4])
    return (prims.mm(rows, prims.permute(w_fc, [1, 0])),)


@pytest.mark.parametrize("target", [LIBRARY_CPU, FUSING_GPU], ids=["cpu", "gpu"])
def test_an_nhwc_permute_of_a_channels_last_map_is_stored_as_read(target, monkeypatch):
    # The permuted value walks the channels-last convolution output contiguously: stored
    # contiguous, it is the Linear's [rows, channels] operand as is. Judged by the buffer it
    # reads instead of by how it reads it, it was stored "channels-last" over (N, H, W, C)
    # (H taken for channels), and the reshape for the mm copied it a second time.
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    inputs = [torch.randn(2, 4, 6, 6), torch.randn(4, 1, 7, 7), torch.randn(8, 4)]
    lowering, sched, got = _lower_and_run(
        prim_graph(_depthwise_then_nhwc_norm_and_linear, *inputs), inputs, target
    )
    conv = _extern_args(sched, "convolution")[0]
    assert is_channels_last(conv.outputs[0].layout) == target.channels_last.inference
    computed = [b for name, b in lowering.buffers.items() if list(b.layout.size) == [2, 6, 6, 4]]
    assert len(computed) == 1 and computed[0].layout.is_contiguous(), [
        b.layout.describe() for b in computed
    ]
    copies = [b for b in lowering.buffers.values() if list(b.layout.size) == [72, 4]]
    assert copies == [], [b.layout.describe() for b in copies]
    torch.testing.assert_close(
        got[0], _depthwise_then_nhwc_norm_and_linear(*inputs)[0], atol=1e-4, rtol=1e-4
    )


def test_bias_is_added_in_the_kernel_that_reads_the_result():
    """A target whose library adds a convolution's bias in a pass of its own (cuDNN through
    aten) gets the convolution without it and the bias as a loop body, fused with the relu
    that reads the result: one kernel after the library call, not two passes."""
    from dataclasses import replace

    target = replace(FUSING_GPU, name="test-bias-in-kernels", conv_bias_in_kernels=True)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    b = torch.randn(4)

    def f(a, weight, bias):
        y = prims.convolution(a, weight, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        return (prims.abs(y),)

    expected = f(x, w, b)
    loop_kernels = []
    for tgt, library_bias in ((target, False), (FUSING_GPU, True)):
        sched = schedule(lower(prim_graph(f, x, w, b), [x, w, b], target=tgt))
        got = run_scheduled(sched, [x, w, b])
        torch.testing.assert_close(got[0], expected[0], atol=1e-4, rtol=1e-4)
        (conv,) = _extern_args(sched, "convolution")
        assert (conv.args[2] is not None) == library_bias
        loop_kernels.append(len([g for g in sched if not g.is_extern]))
    assert loop_kernels[0] == loop_kernels[1]  # the add rode along with the relu


def _dense_block_step(x, w1, w2, w3, w4, w5, w6, w7):
    """DenseNet's step: the concat of earlier convolutions' maps (fewer channels each than
    the concat) read twice, so that it gets a buffer of its own, then normalized (here an
    abs) and convolved; sums returned, so that the graph keeps its feature maps to itself."""
    joined = prims.cat([_conv(x, w) for w in (w1, w2, w3, w4, w5, w6)], 1)
    return (prims.sum(_conv(prims.abs(joined), w7), [1, 2, 3]), prims.sum(joined, [1, 2, 3]))


@pytest.mark.parametrize("target", [LIBRARY_CPU, FUSING_GPU], ids=["cpu", "gpu"])
def test_a_concat_of_channels_last_maps_is_stored_channels_last(target, monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    inputs = [torch.randn(2, 3, 8, 8)]
    inputs += [torch.randn(c, 3, 3, 3) for c in (1, 2, 1, 2, 2, 2)] + [torch.randn(5, 10, 3, 3)]
    lowering, _, got = _lower_and_run(prim_graph(_dense_block_step, *inputs), inputs, target)
    joined = [b.layout for b in lowering.buffers.values() if list(b.layout.size) == [2, 10, 8, 8]]
    assert len(joined) == 2  # the concat and its abs
    assert all(is_channels_last(layout) for layout in joined), [x.describe() for x in joined]
    for value, want in zip(got, _dense_block_step(*inputs), strict=True):
        torch.testing.assert_close(value, want, atol=1e-4, rtol=1e-4)


def test_walk_format_judges_the_order_of_strides_not_their_values():
    size = [2, 10, 8, 8]  # a concat's loops; its 4-channel input is walked at its own strides
    assert walk_format(size, [256, 1, 32, 4]) == "channels_last"
    assert walk_format(size, [256, 64, 8, 1]) == "contiguous"
    assert walk_format(size, [0, 1, 32, 4]) is None  # a broadcast: no say
    assert walk_format(size, [256, 1, 4, 32]) is None  # another order
    assert walk_format([2, 10], [10, 1]) is None  # not a feature map


def _shuffle_block(x, w1, w2):
    """ShuffleNet's channel shuffle of a normalized convolution (here a costly pointwise
    chain): split the channels into 2 groups, swap the two dims, clone contiguous, merge
    back; the shuffled map read twice (a convolution and a sum)."""
    h = prims.exp(prims.sin(prims.exp(prims.tanh(prims.sin(_conv(x, w1))))))
    five = prims.split_dim(h, 1, 2)
    shuffled = prims.clone(
        prims.permute(five, [0, 2, 1, 3, 4]), memory_format=torch.contiguous_format
    )
    flat = prims.collapse_view(shuffled, 1, 3)
    return (prims.sum(_conv(flat, w2), [1, 2, 3]), prims.sum(flat, [1, 2, 3]))


def test_a_channel_shuffle_is_stored_as_the_map_its_readers_read(monkeypatch):
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    inputs = [torch.randn(2, 3, 8, 8), torch.randn(6, 3, 3, 3), torch.randn(4, 6, 3, 3)]
    lowering, _, got = _lower_and_run(prim_graph(_shuffle_block, *inputs), inputs, FUSING_GPU)
    stored = [b.layout for b in lowering.buffers.values() if not b.name.startswith("arg")]
    assert all(len(layout.size) != 5 for layout in stored), [x.describe() for x in stored]
    maps = [layout for layout in stored if list(layout.size) == [2, 6, 8, 8]]
    assert maps and all(is_channels_last(layout) for layout in maps), [x.describe() for x in maps]
    for value, want in zip(got, _shuffle_block(*inputs), strict=True):
        torch.testing.assert_close(value, want, atol=1e-4, rtol=1e-4)


def _slow_nhwc_target():
    """FUSING_GPU with the Triton target's slow-NHWC rules (lowering/convolution.py)."""
    import dataclasses

    policy = dataclasses.replace(
        FUSING_GPU.channels_last, slow_nhwc=frozenset({"channel_multiplier", "image_input"})
    )
    return dataclasses.replace(FUSING_GPU, channels_last=policy)


def _grouped(x, w, groups):
    return prims.convolution(x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], groups)


def test_convolutions_the_library_runs_slow_nhwc_keep_eager_layout(monkeypatch):
    """A depthwise convolution with a channel multiplier (PiT's pooling) and an image's few
    channels into a few (TNT's pixel embedding; in this inference graph also a narrow CNN
    stem read by the next convolution) stay NCHW; a plain depthwise one and the convolution
    after the stem run channels-last."""
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    target = _slow_nhwc_target()
    x, image = torch.randn(2, 4, 8, 8), torch.randn(2, 3, 8, 8)
    multiplier, depthwise = torch.randn(8, 1, 3, 3), torch.randn(4, 1, 3, 3)
    stem, after = torch.randn(6, 3, 3, 3), torch.randn(5, 6, 3, 3)

    def fn(a, img, m, d, s, n):
        pooled = _grouped(a, m, 4)
        spread = _grouped(a, d, 4)
        embedded = _conv(img, s)  # read by no convolution
        features = _conv(prims.abs(_conv(img, s)), n)  # a stem and the next convolution
        return tuple(prims.sum(v, [1, 2, 3]) for v in (pooled, spread, embedded, features))

    inputs = [x, image, multiplier, depthwise, stem, after]
    _, sched, got = _lower_and_run(prim_graph(fn, *inputs), inputs, target)
    layouts = [is_channels_last(c.outputs[0].layout) for c in _extern_args(sched, "convolution")]
    assert layouts == [False, True, False, False, True]
    for g, want in zip(got, fn(*inputs), strict=True):
        torch.testing.assert_close(g, want, atol=1e-4, rtol=1e-4)
    # the training forward's prediction of what is stored NHWC follows the same rules
    gm = prim_graph(fn, *inputs)
    convs = [
        n for n in gm.graph.nodes if n.op == "call_function" and "convolution" in str(n.target)
    ]
    predicted = predicted_channels_last(gm, target.channels_last.slow_nhwc)
    assert [c in predicted for c in convs] == [False, True, False, False, True]


@pytest.mark.parametrize(
    ("out_channels", "returns_maps", "nhwc"),
    [(32, False, False), (33, False, True), (64, False, True), (32, True, True)],
)
def test_a_narrow_stem_runs_nchw_in_inference(monkeypatch, out_channels, returns_maps, nhwc):
    """An image's three channels into at most 32 run NCHW in an inference graph (cuDNN's
    NHWC path copies the images and is slower there); wider stems (ResNet's 64) run NHWC, and
    so does a narrow one in a graph returning feature maps (a training forward). The next
    convolution runs NHWC either way."""
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    image, stem = torch.randn(2, 3, 8, 8), torch.randn(out_channels, 3, 3, 3)
    after = torch.randn(4, out_channels, 3, 3)

    def fn(img, s, n):
        features = prims.abs(_conv(img, s))
        total = prims.sum(_conv(features, n), [1, 2, 3])
        return (total, features) if returns_maps else (total,)

    inputs = [image, stem, after]
    _, sched, got = _lower_and_run(prim_graph(fn, *inputs), inputs, _slow_nhwc_target())
    layouts = [is_channels_last(c.outputs[0].layout) for c in _extern_args(sched, "convolution")]
    assert layouts == [nhwc, True]
    for g, want in zip(got, fn(*inputs), strict=True):
        torch.testing.assert_close(g, want, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("radix", [2, 16])
def test_a_split_of_channels_last_channels_keeps_their_memory_order(monkeypatch, radix):
    """ResNeSt's split attention: a convolution's NHWC output, activated, read as [B, radix,
    C, H, W] by a sum over the radix and a weighted sum. The split is stored in the map's
    NHWC order (channels step 1, the radix C apart). A sum over a long radix, which walks
    it along the channels, is stored channels-last too: stored contiguous, every reader read
    its channels H * W apart. ResNeSt's radix of 2 is summed inline by its readers."""
    monkeypatch.delenv("EMBER_CHANNELS_LAST", raising=False)
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4 * radix, 3, 3, 3)

    def fn(a, b):
        split = prims.reshape(prims.exp(_conv(a, b)), [2, radix, 4, 6, 6])
        total = prims.sum(split, [1])
        gate = prims.broadcast_in_dim(prims.amax(total, [2, 3]), [2, radix, 4, 6, 6], [0, 2])
        return (prims.sum(prims.sum(prims.mul(split, gate), [1]), [1, 2, 3]),)

    lowering, _, got = _lower_and_run(prim_graph(fn, x, w), [x, w], FUSING_GPU)
    torch.testing.assert_close(got[0], fn(x, w)[0], atol=1e-3, rtol=1e-4)
    split = [b for b in lowering.buffers.values() if len(b.get_size()) == 5]
    assert [[int(s) for s in b.layout.stride] for b in split] == [
        [144 * radix, 4, 1, 24 * radix, 4 * radix]
    ]
    totals = [
        b for b in lowering.buffers.values()
        if [int(n) for n in b.get_size()] == [2, 4, 6, 6] and hasattr(b, "data")
    ]  # fmt: skip
    if radix <= UNROLL_MAX:
        assert not totals  # computed where it is read
    else:
        assert totals and all(is_channels_last(b.layout) for b in totals)


def test_tokens_computed_from_a_channels_last_map_are_stored_as_tokens(check):
    # Swin's [B, H, W, C] tokens: an NHWC map read through permute and reshapes, whose
    # indices are the loops' own once simplified: they vote contiguous, not channels-last
    # (which for [B, H, W, C] would store H innermost)
    def f(x, y):
        tokens = prims.reshape(prims.permute(x, [0, 2, 3, 1]), [2, 16, 8])
        grid = prims.reshape(prims.exp(prims.add(tokens, y)), [2, 4, 4, 8])
        return prims.sum(grid, [3]), prims.mul(grid, grid)

    x = torch.randn(2, 8, 4, 4).to(memory_format=torch.channels_last)
    lowering, _ = check(f, x, torch.randn(2, 16, 8))
    grids = [
        b for b in lowering.buffers.values() if [int(n) for n in b.layout.size] == [2, 4, 4, 8]
    ]
    assert grids and all([int(s) for s in b.layout.stride] == [128, 32, 8, 1] for b in grids)


def _alias_read_by_two_convolutions(x, w1, w2):
    # a residual stream's sum, read through an alias by a block's main path and its
    # shortcut (GhostNet's `x += shortcut` makes the alias)
    shared = prims.view_of(prims.add(prims.abs(x), x))
    return (prims.add(_conv(shared, w1), _conv(shared, w2)),)


def test_a_computed_view_two_convolutions_read_is_stored_once(check):
    """Each convolution wants its input channels-last: the second one reads the first's
    copy instead of making its own (both were alive at once)."""
    x, w1, w2 = torch.randn(2, 8, 8, 8), torch.randn(4, 8, 3, 3), torch.randn(4, 8, 3, 3)
    check(_alias_read_by_two_convolutions, x, w1, w2, atol=1e-4, rtol=1e-4)
    gm = prim_graph(_alias_read_by_two_convolutions, x, w1, w2)
    sched = schedule(lower(gm, [x, w1, w2], target=FUSING_GPU))
    convs = _extern_args(sched, "convolution")
    inputs = {conv.tensor_args()[0].name for conv in convs}
    assert len(convs) == 2 and len(inputs) == 1, inputs
