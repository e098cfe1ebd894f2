"""Indexing: gather/scatter/index/index_put/index_select/index_add/take/put/masked_scatter."""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import broadcast_shapes, canonical_dim, expand_to, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import as_tensor, convert, result_type

aten = torch.ops.aten


class DataDependentIndex(NotImplementedError):
    """A boolean-mask index: its result shape depends on the data, which no prim can express."""


def _flat(a: torch.Tensor) -> torch.Tensor:
    return prims.reshape(a, [a.numel()])


def _long(index: torch.Tensor) -> torch.Tensor:
    return convert(index, torch.int64)


def _wrap_negative(index: torch.Tensor, size: int) -> torch.Tensor:
    neg = prims.lt(index, scalar(0, index))
    return prims.where(neg, prims.add(index, scalar(size, index)), index)


@register_decomposition(aten.gather.default)
def gather(a, dim, index, *, sparse_grad=False):
    if index.numel() == 0:
        return prims.full(list(index.shape), 0, dtype=a.dtype, device=a.device)
    if a.dim() == 0:
        flat = prims.gather(prims.reshape(a, [1]), 0, _flat(_long(index)))
        return prims.reshape(flat, list(index.shape))
    return prims.gather(a, canonical_dim(dim, a.dim()), _long(index))


_REDUCE_NAMES = {"add": "sum", "multiply": "prod"}


@register_decomposition(aten.scatter.src, aten.scatter.value)
def scatter(a, dim, index, src):
    if not isinstance(src, torch.Tensor):
        src = expand_to(scalar(src, a), list(index.shape))
    if a.dim() == 0:
        return prims.reshape(scatter(prims.reshape(a, [1]), 0, _flat(index), _flat(src)), [])
    return prims.scatter(a, canonical_dim(dim, a.dim()), _long(index), convert(src, a.dtype))


@register_decomposition(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(a, dim, index, src, *, reduce):
    if not isinstance(src, torch.Tensor):
        src = expand_to(scalar(src, a), list(index.shape))
    return prims.scatter_reduce(
        a,
        canonical_dim(dim, a.dim()),
        _long(index),
        convert(src, a.dtype),
        _REDUCE_NAMES[reduce],
        True,
    )


@register_decomposition(aten.scatter_add.default)
def scatter_add(a, dim, index, src):
    if index.numel() == 0:  # eager accepts any rank of empty index (gather's backward)
        return prims.clone(a)
    if a.dim() == 0:
        return prims.reshape(scatter_add(prims.reshape(a, [1]), 0, _flat(index), _flat(src)), [])
    return prims.scatter_add(a, canonical_dim(dim, a.dim()), _long(index), convert(src, a.dtype))


@register_decomposition(aten.scatter_reduce.two)
def scatter_reduce(a, dim, index, src, reduce, *, include_self=True):
    if a.dim() == 0:
        out = scatter_reduce(
            prims.reshape(a, [1]), 0, _flat(index), _flat(src), reduce, include_self=include_self
        )
        return prims.reshape(out, [])
    return prims.scatter_reduce(
        a, canonical_dim(dim, a.dim()), _long(index), convert(src, a.dtype), reduce, include_self
    )


@register_decomposition(aten.index_select.default)
def index_select(a, dim, index):
    if a.dim() == 0:  # eager: a 0-dim result whatever the index shape
        picked = prims.index_select(prims.reshape(a, [1]), 0, _flat(_long(index)))
        return prims.reshape(picked, [])
    return prims.index_select(
        a, canonical_dim(dim, a.dim()), _flat(_long(index)) if index.dim() == 0 else _long(index)
    )


def _index_list(indices):
    out = []
    for idx in indices:
        if idx is not None and idx.dtype in (torch.bool, torch.uint8):
            raise DataDependentIndex(
                "indexing with a boolean mask has a data-dependent result shape, which no prim "
                "expresses; use torch.where(mask, ...) or integer indices"
            )
        out.append(None if idx is None else _long(idx))
    return out


@register_decomposition(aten.index.Tensor)
def index(a, indices):
    return prims.index(a, _index_list(indices))


@register_decomposition(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(a, indices, values, accumulate=False):
    masked = _mask_put(a, indices, values, accumulate)
    if masked is not None:
        return masked
    return prims.index_put(a, _index_list(indices), convert(values, a.dtype), accumulate)


def _mask_put(a, indices, values, accumulate):
    """``a[mask] = v`` as a where: one leading bool mask and a v that is the same for every
    selected element (a single value, or one row of the trailing dims)."""
    if len(indices) != 1 or indices[0] is None or indices[0].dtype != torch.bool:
        return None
    mask = indices[0]
    trailing = list(a.shape[mask.dim() :])
    if list(mask.shape) != list(a.shape[: mask.dim()]):
        return None
    if values.numel() == 1:
        v = prims.reshape(convert(values, a.dtype), [])
    elif list(values.shape) == trailing:
        v = convert(values, a.dtype)
    else:
        return None
    full_mask = prims.broadcast_in_dim(mask, list(a.shape), list(range(mask.dim())))
    update = prims.add(a, v) if accumulate else expand_to(v, list(a.shape))
    return prims.where(full_mask, update, a)


@register_decomposition(aten._unsafe_index.Tensor)
def unsafe_index(a, indices):
    return prims.index(a, _index_list(indices))


def _along(a, dim, index):
    """The ``indices`` list that selects ``index`` along ``dim`` (others: whole dims)."""
    return [None] * dim + [_long(index)]


@register_decomposition(aten.index_add.default)
def index_add(a, dim, index, source, *, alpha=1):
    dim = canonical_dim(dim, a.dim())
    src = convert(source, a.dtype)
    if alpha != 1:
        src = prims.mul(src, scalar(alpha, src))
    if a.dim() == 0:
        return prims.add(a, prims.reshape(src, []))
    return prims.index_add(a, dim, _long(index), src)


@register_decomposition(aten.index_copy.default)
def index_copy(a, dim, index, source):
    dim = canonical_dim(dim, a.dim())
    if a.dim() == 0:
        return prims.clone(prims.reshape(convert(source, a.dtype), []))
    src = _move_dim_first(convert(source, a.dtype), dim)
    return _move_dim_back(prims.index_put(_move_dim_first(a, dim), [_long(index)], src, False), dim)


@register_decomposition(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(a, dim, index, value):
    dim = canonical_dim(dim, a.dim())
    v = convert(value, a.dtype) if isinstance(value, torch.Tensor) else scalar(value, a)
    if a.dim() == 0:
        return prims.clone(v)
    moved = _move_dim_first(a, dim)
    shape = [index.numel(), *moved.shape[1:]]
    filled = prims.index_put(moved, [_flat(_long(index))], expand_to(v, shape), False)
    return _move_dim_back(filled, dim)


def _move_dim_first(a, dim):
    if dim == 0 or a.dim() == 0:
        return a
    return prims.permute(a, [dim, *[d for d in range(a.dim()) if d != dim]])


def _move_dim_back(a, dim):
    if dim == 0 or a.dim() == 0:
        return a
    order = list(range(1, a.dim()))
    order.insert(dim, 0)
    return prims.permute(a, order)


@register_decomposition(aten.take.default)
def take(a, index):
    flat = prims.reshape(a, [a.numel()])
    idx = _wrap_negative(_long(index), a.numel())
    return prims.index(flat, [idx])


@register_decomposition(aten.put.default)
def put(a, index, source, accumulate=False):
    flat = prims.reshape(a, [a.numel()])
    idx = _flat(_wrap_negative(_long(index), a.numel()))
    src = _flat(convert(source, a.dtype))
    return prims.reshape(prims.index_put(flat, [idx], src, accumulate), list(a.shape))


@register_decomposition(aten.masked_scatter.default)
def masked_scatter(a, mask, source):
    # The k-th True position (row-major over the broadcast shape) takes source.flatten()[k].
    shape = broadcast_shapes(a.shape, mask.shape)
    m = expand_to(mask, shape)
    flat_mask = _flat(convert(m, torch.int64))
    position = prims.sub(prims.cumsum(flat_mask, 0), scalar(1, flat_mask))
    position = prims.maximum(position, scalar(0, position))
    src = _flat(convert(source, a.dtype))
    if src.numel() == 0:
        return prims.clone(expand_to(a, shape))
    position = prims.minimum(position, scalar(src.numel() - 1, position))
    taken = prims.reshape(prims.index(src, [position]), shape)
    return prims.where(m, taken, expand_to(a, shape))


@register_decomposition(aten._unsafe_masked_index.default)
def unsafe_masked_index(a, mask, indices, fill):
    clamped = [
        None if i is None else prims.where(mask, _long(i), scalar(0, _long(i))) for i in indices
    ]
    got = prims.index(a, clamped)
    return prims.where(mask, got, scalar(fill, got))


@register_decomposition(aten._unsafe_masked_index_put_accumulate.default)
def unsafe_masked_index_put_accumulate(a, mask, indices, values):
    clamped = [
        None if i is None else prims.where(mask, _long(i), scalar(0, _long(i))) for i in indices
    ]
    masked_values = prims.where(mask, convert(values, a.dtype), scalar(0, a))
    return prims.index_put(a, clamped, masked_values, True)


@register_decomposition(aten.isin.Tensor_Tensor, aten.isin.Tensor_Scalar, aten.isin.Scalar_Tensor)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    dtype = result_type(elements, test_elements)
    like = elements if isinstance(elements, torch.Tensor) else test_elements
    e = as_tensor(elements, dtype, like.device)
    t = _flat(as_tensor(test_elements, dtype, like.device))
    eq = prims.eq(prims.expand_dims(e, [e.dim()]), t)
    out = prims.any(eq, [e.dim()])
    return prims.logical_not(out) if invert else out


@register_decomposition(aten.index_reduce.default)
def index_reduce(a, dim, index, source, reduce, *, include_self=True):
    if a.dim() == 0:
        out = index_reduce(
            prims.reshape(a, [1]),
            0,
            index,
            prims.reshape(source, [1]),
            reduce,
            include_self=include_self,
        )
        return prims.reshape(out, [])
    dim = canonical_dim(dim, a.dim())
    src = convert(source, a.dtype)
    # scatter_reduce along dim with the index broadcast over the source's other dims.
    idx = prims.broadcast_in_dim(_flat(_long(index)), list(src.shape), [dim])
    return prims.scatter_reduce(a, dim, idx, src, reduce, include_self)


def _max_unpool(a, indices, output_size):
    lead = a.dim() - len(output_size)
    plane = 1
    for s in output_size:
        plane *= s
    flat_in = prims.reshape(a, [*a.shape[:lead], _numel(a.shape[lead:])])
    flat_idx = prims.reshape(_long(indices), list(flat_in.shape))
    zeros = prims.full([*a.shape[:lead], plane], 0, dtype=a.dtype, device=a.device)
    out = prims.scatter(zeros, lead, flat_idx, flat_in)
    return prims.reshape(out, [*a.shape[:lead], *output_size])


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@register_decomposition(aten.max_unpool2d.default)
def max_unpool2d(a, indices, output_size):
    return _max_unpool(a, indices, list(output_size))


@register_decomposition(aten.max_unpool3d.default)
def max_unpool3d(a, indices, output_size, stride, padding):
    return _max_unpool(a, indices, list(output_size))


@register_decomposition(aten.searchsorted.Tensor)
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    if sorter is not None:
        sorted_sequence = prims.gather(sorted_sequence, sorted_sequence.dim() - 1, _long(sorter))
    out = prims.searchsorted(sorted_sequence, values, right or side == "right")
    return convert(out, torch.int32 if out_int32 else torch.int64)


@register_decomposition(aten.bucketize.Tensor)
def bucketize(values, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, values, out_int32=out_int32, right=right)


@register_decomposition(aten.searchsorted.Scalar)
def searchsorted_scalar(
    sorted_sequence, value, *, out_int32=False, right=False, side=None, sorter=None
):
    values = prims.scalar_tensor(value, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    return searchsorted(
        sorted_sequence, values, out_int32=out_int32, right=right, side=side, sorter=sorter
    )
