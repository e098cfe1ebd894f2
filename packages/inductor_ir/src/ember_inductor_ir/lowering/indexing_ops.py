"""Lowerings of the gather-style indexing prims: loads through ``ops.indirect_indexing``.

Scatter-style prims (scatter, index_put, ...) write through data-dependent indices; they have
no lowering and run as counted fallback kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

from ..indexing import Expr
from ..nodes import Pointwise, TensorBox
from ._helpers import broadcast_loader, broadcast_shapes
from .registry import register_lowering


@register_lowering("gather")
def lower_gather(ctx: Any, a: TensorBox, dim: int, index: TensorBox) -> TensorBox:
    size = a.get_size()
    dim = dim % max(len(size), 1)
    load_a, load_index = a.make_loader(), index.make_loader()

    def inner_fn(ops: Any, idx: Sequence[Expr]) -> Any:
        if not size:
            return load_a(ops, [])
        where_to = ops.indirect_indexing(load_index(ops, idx), size[dim])
        return load_a(ops, [where_to if d == dim else i for d, i in enumerate(idx)])

    out = list(index.get_size())
    return TensorBox(Pointwise(a.get_device(), a.get_dtype(), inner_fn, out))


@register_lowering("index_select")
def lower_index_select(ctx: Any, a: TensorBox, dim: int, index: TensorBox) -> TensorBox:
    size = list(a.get_size())
    if not size:
        return TensorBox(Pointwise(a.get_device(), a.get_dtype(), a.make_loader(), []))
    dim = dim % len(size)
    load_a, load_index = a.make_loader(), index.make_loader()
    index_is_scalar = len(index.get_size()) == 0

    def inner_fn(ops: Any, idx: Sequence[Expr]) -> Any:
        at = [] if index_is_scalar else [idx[dim]]
        where_to = ops.indirect_indexing(load_index(ops, at), size[dim])
        return load_a(ops, [where_to if d == dim else i for d, i in enumerate(idx)])

    out = [*size[:dim], sympy.Integer(1) if index_is_scalar else index.get_size()[0]]
    out += size[dim + 1 :]
    return TensorBox(Pointwise(a.get_device(), a.get_dtype(), inner_fn, out))


@register_lowering("index")
def lower_index(ctx: Any, a: TensorBox, indices: Sequence[TensorBox | None]) -> TensorBox:
    """Advanced indexing: the indexed dims are replaced by the broadcast index shape, in
    place when the indexed dims are adjacent, else in front (numpy's rule)."""
    size = list(a.get_size())
    indices = list(indices) + [None] * (len(size) - len(indices))
    used = [d for d, t in enumerate(indices) if t is not None]
    bshape = broadcast_shapes(*[indices[d].get_size() for d in used])
    adjacent = used == list(range(used[0], used[-1] + 1))
    rest = [d for d in range(len(size)) if d not in used]
    if adjacent:
        before, after = [d for d in rest if d < used[0]], [d for d in rest if d > used[-1]]
    else:
        before, after = [], rest
    out = [size[d] for d in before] + list(bshape) + [size[d] for d in after]
    loaders = {d: broadcast_loader(indices[d], bshape) for d in used}
    load_a = a.make_loader()

    def inner_fn(ops: Any, idx: Sequence[Expr]) -> Any:
        nb = len(before)
        b_idx = list(idx[nb : nb + len(bshape)])
        full: list[Expr] = [sympy.Integer(0)] * len(size)
        for k, d in enumerate(before):
            full[d] = idx[k]
        for k, d in enumerate(after):
            full[d] = idx[nb + len(bshape) + k]
        for d in used:
            full[d] = ops.indirect_indexing(loaders[d](ops, b_idx), size[d])
        return load_a(ops, full)

    return TensorBox(Pointwise(a.get_device(), a.get_dtype(), inner_fn, out))
