"""Extern kernels take strided views of a computed buffer instead of a recomputing copy."""

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.handlers.readwrite import ReadWriteHandler
from ember_inductor_ir.indexing import index_vars
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims


def _computed(lowering) -> list[ComputedBuffer]:
    return [op for op in lowering.operations if isinstance(op, ComputedBuffer)]


def _externs(lowering) -> list[ExternKernel]:
    return [op for op in lowering.operations if isinstance(op, ExternKernel)]


def test_transposed_pointwise_feeds_mm_without_a_copy(check):
    # The GELU-backward shape of the transformer block: one pointwise read by mm as is and
    # by mm transposed (the transposed read first). Both mms read the one buffer; no
    # transposed copy is computed.
    def fn(x, g, w, a):
        h = prims.mul(prims.exp(x), g)
        return (prims.mm(prims.permute(h, [1, 0]), a), prims.mm(h, w))

    lowering, sched = check(
        fn, torch.randn(6, 5), torch.randn(6, 5), torch.randn(5, 3), torch.randn(6, 4)
    )
    (buf,) = _computed(lowering)
    transposed, plain = _externs(lowering)
    assert transposed.args[0].name == buf.name
    assert [int(s) for s in transposed.args[0].view.stride] == [1, 5]
    assert plain.args[0].name == buf.name and plain.args[0].view is None
    assert sum(1 for g in sched if not g.is_extern) == 1


def test_reshaped_then_transposed_pointwise_is_computed_once(check):
    # [b, s, d] -> [b*s, d] -> transposed for the weight gradient: one buffer, a strided view.
    def fn(x, a):
        h = prims.sin(x)
        flat = prims.reshape(h, [6, 5])
        return (prims.mm(prims.permute(flat, [1, 0]), a),)

    lowering, _ = check(fn, torch.randn(2, 3, 5), torch.randn(6, 4))
    (buf,) = _computed(lowering)
    assert [int(s) for s in buf.ranges] == [2, 3, 5]
    (mm,) = _externs(lowering)
    assert mm.args[0].name == buf.name
    assert [int(s) for s in mm.args[0].view.stride] == [1, 5]


def test_sliced_pointwise_still_copies_only_the_slice(check):
    # A slice reads fewer elements than its base: copying the slice computes less.
    def fn(x, a):
        h = prims.sin(x)
        part = prims.slice(h, [0, 0], [2, 5])
        return (prims.mm(part, a),)

    lowering, _ = check(fn, torch.randn(8, 5), torch.randn(5, 3))
    (buf,) = _computed(lowering)
    assert [int(s) for s in buf.ranges] == [2, 5]


def test_expensive_value_read_through_a_view_by_several_readers_is_realized(check):
    # sum and mm both read h through a reshape: h's node has one user (the reshape), but two
    # readers; an expensive body is computed once instead of once per reader, and stored in
    # the shape its readers read (the reshape's).
    def fn(x, w):
        h = x
        for _ in range(12):
            h = prims.mul(prims.add(h, x), x)
        flat = prims.reshape(h, [12, 5])
        return (prims.mm(flat, w), prims.sum(flat, [0]))

    lowering, _ = check(fn, torch.rand(4, 3, 5) * 0.5, torch.randn(5, 3), atol=1e-4, rtol=1e-4)
    computed = _computed(lowering)
    assert [int(s) for s in computed[0].ranges] == [12, 5]
    reduction = computed[1]
    assert reduction.is_reduction()
    rw = ReadWriteHandler()
    reduction.store_body(rw, index_vars("i", 1), index_vars("r", 1))
    assert {name for name, _ in rw.reads} == {computed[0].name}


def test_a_reshaped_channels_last_buffer_is_a_view(check):
    # [B, 2C, H, W] stored NHWC and split to [B, 2, C, H, W] (ResNeSt's radix split): each
    # split run of dims is one run in memory, so the reshape is a view of the buffer.
    from ember_inductor_ir.layout import FixedLayout, channels_last_strides
    from ember_inductor_ir.nodes import InputBuffer
    from ember_inductor_ir.views import reshape, storage_view

    size = [2, 8, 3, 5]
    layout = FixedLayout(torch.device("cpu"), torch.float32, size, channels_last_strides(size))
    split = reshape(InputBuffer("x", layout), [2, 2, 4, 3, 5])
    found = storage_view(split)
    assert found is not None and found[0].name == "x"
    assert [int(s) for s in found[1].stride] == [120, 4, 1, 40, 8]
    # a merge across the grain (channels with rows) is no view
    assert storage_view(reshape(InputBuffer("x", layout), [2, 24, 5])) is None
