"""InnerLoopCostHandler counts what a body runs per step of its innermost loop: loop-invariant
arithmetic is free, expensive invariant ops (sqrt, division, libm calls) are not; and the
lowering recomputes a multiply-read pointwise value whose per-element work is small."""

import torch

from ember_inductor_ir.handlers.inner_cost import InnerLoopCostHandler
from ember_inductor_ir.indexing import index_vars
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims

F32 = torch.float32


def _scale_shift(ops, index, invariant_root=False):
    """x[c, j] * scale[c] + shift[c], the per-channel values a chain of invariant ops."""
    c, j = index
    scale = ops.load("w", c)
    for _ in range(10):
        scale = ops.mul(scale, ops.add(ops.load("v", c), ops.constant(1.0, F32)))
    if invariant_root:
        scale = ops.sqrt(scale)
    shift = ops.sub(ops.load("b", c), ops.mul(ops.load("m", c), scale))
    return ops.add(ops.mul(ops.load("x", 64 * c + j), scale), shift)


def test_invariant_arithmetic_is_free():
    c, j = index_vars("i", 2)
    counter = InnerLoopCostHandler(j)
    _scale_shift(counter, [c, j])
    assert counter.op_count == 3  # load x, mul, add


def test_invariant_square_roots_still_count():
    c, j = index_vars("i", 2)
    counter = InnerLoopCostHandler(j)
    _scale_shift(counter, [c, j], invariant_root=True)
    assert counter.op_count == 4


def test_loads_through_varying_indirect_indices_vary():
    c, j = index_vars("i", 2)
    counter = InnerLoopCostHandler(j)
    row = counter.indirect_indexing(counter.load("idx", j), 10)
    counter.load("table", 8 * row + c)
    fixed = counter.indirect_indexing(counter.load("idx", c), 10)
    counter.load("table", 8 * fixed)
    assert counter.op_count == 3  # load idx[j], its indirect index, the table load


def _per_channel(t):
    return prims.broadcast_in_dim(t, [4, 8, 16], [1])


def _scaled_by_exp(x, w, b, m, v):
    # exp(w) is read once, so it is computed inside y: a libm call per element if not hoisted
    y = prims.mul(x, _per_channel(prims.exp(w)))
    return prims.sum(y, [0, 2]), prims.mul(y, y)


def _chain(a, b):
    for _ in range(6):
        a = prims.mul(a, prims.add(b, b))
    return a


def _normalize(x, w, b, m, v):
    # scale and shift are each read once (computed inside y), 18+ ops per channel together
    y = prims.add(prims.mul(x, _per_channel(_chain(w, v))), _per_channel(_chain(b, m)))
    return prims.sum(y, [0, 2]), prims.mul(y, y)


def _inputs():
    x = torch.randn(4, 8, 16)
    w, b, m = torch.randn(8), torch.randn(8), torch.randn(8)
    return x, w, b, m, torch.rand(8) * 0.1 + 0.5


def _feature_buffers(lowering) -> int:
    return sum(
        1
        for op in lowering.operations
        if isinstance(op, ComputedBuffer) and [int(s) for s in op.get_size()] == [4, 8, 16]
    )


def test_a_value_read_twice_is_recomputed_when_its_per_element_work_is_small(check):
    lowering, _ = check(_normalize, *_inputs())
    assert _feature_buffers(lowering) == 1  # only y * y; y is computed inside both readers


def test_a_value_with_a_per_channel_exp_is_stored(check):
    lowering, _ = check(_scaled_by_exp, *_inputs(), rtol=1e-4)
    assert _feature_buffers(lowering) == 2
