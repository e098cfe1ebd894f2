"""Extern kernels take strided views of a computed buffer instead of a recomputing copy."""

import pytest
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
        flat = prims.reshape(h, [6, 5])
        return (prims.mm(flat, w), prims.sum(flat, [0]))

    lowering, _ = check(fn, torch.rand(2, 3, 5) * 0.5, torch.randn(5, 3), atol=1e-4, rtol=1e-4)
    computed = _computed(lowering)
    assert [int(s) for s in computed[0].ranges] == [6, 5]
    reduction = computed[1]
    assert reduction.is_reduction()
    rw = ReadWriteHandler()
    reduction.store_body(rw, index_vars("i", 1), index_vars("r", 1))
    assert {name for name, _ in rw.reads} == {computed[0].name}


@pytest.mark.parametrize("cloned", [False, True], ids=["viewed", "cloned"])
def test_a_copied_matmul_operand_keeps_its_rows_aligned(check, cloned):
    # Attention's k^T over heads split from one projection: [B*H, D, N] is no view of the
    # projection's buffer, so it is copied. Stored row-major its rows would be N = 6 floats
    # (24 bytes, unaligned for the library's fast kernels); stored with D innermost they are
    # D = 4 floats (16 bytes), and the copy reads the projection along its grain.
    b, n, h, d = 2, 6, 3, 4

    def fn(proj, q):
        k = prims.slice(prims.reshape(proj, [b, n, 2, h, d]), [0, 0, 1, 0, 0], [b, n, 2, h, d])
        kt = prims.permute(prims.reshape(k, [b, n, h, d]), [0, 2, 3, 1])
        if cloned:  # matmul's own copy before it reshapes (eager's expand + reshape)
            kt = prims.clone(kt)
        return (prims.bmm(q, prims.reshape(kt, [b * h, d, n])),)

    lowering, _ = check(fn, torch.randn(b, n, 2 * h * d), torch.randn(b * h, n, d))
    (bmm,) = _externs(lowering)
    (copy,) = _computed(lowering)
    assert bmm.args[1].name == copy.name
    assert [int(s) for s in copy.layout.stride][-2:] == [1, d]
