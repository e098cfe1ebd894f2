"""A value read only through slices that do not overlap is recomputed in each slice's reader:
no element is computed twice, and nothing is stored (gMLP's gate: gelu(h).chunk(2))."""

import torch

from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims


def _expensive(x):
    h = x
    for _ in range(6):
        h = prims.mul(prims.erf(h), x)  # well past the inline limit
    return h


def _stored_shapes(lowering) -> list[list[int]]:
    return [
        [int(s) for s in op.ranges] for op in lowering.operations if isinstance(op, ComputedBuffer)
    ]


def test_halves_of_an_expensive_value_are_computed_in_their_readers(check):
    def fn(x):
        h = _expensive(x)
        u = prims.slice(h, [0, 0], [4, 8])
        v = prims.slice(h, [0, 8], [4, 16])
        return (prims.mul(u, prims.broadcast_in_dim(prims.sum(v, [1]), [4, 8], [0])),)

    lowering, _ = check(fn, torch.randn(4, 16))
    assert [4, 16] not in _stored_shapes(lowering)


def test_overlapping_slices_still_store_the_value(check):
    def fn(x):
        h = _expensive(x)
        u = prims.slice(h, [0, 0], [4, 10])
        v = prims.slice(h, [0, 6], [4, 16])
        return (prims.add(u, v),)

    lowering, _ = check(fn, torch.randn(4, 16))
    assert [4, 16] in _stored_shapes(lowering)


def test_a_slice_beside_a_whole_reader_still_stores_the_value(check):
    def fn(x):
        h = _expensive(x)
        u = prims.slice(h, [0, 0], [4, 8])
        return (prims.sin(h), prims.cos(u))

    lowering, _ = check(fn, torch.randn(4, 16))
    assert [4, 16] in _stored_shapes(lowering)
