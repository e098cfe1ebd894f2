"""Scans and sorting: cumsum/cumprod/logcumsumexp/cummax/cummin, sort/topk/kthvalue/median."""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, keep_dims, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import convert, is_integral

aten = torch.ops.aten


def _on_1d(fn, a, dim, *rest):
    """Run a scan on a 0-dim tensor as on a 1-element vector (eager accepts dim 0 / -1)."""
    if a.dim() == 0:
        canonical_dim(dim, 0)
        out = fn(prims.expand_dims(a, [0]), 0, *rest)
        if isinstance(out, tuple):
            return tuple(prims.squeeze(o, [0]) for o in out)
        return prims.squeeze(out, [0])
    return fn(a, canonical_dim(dim, a.dim()), *rest)


def _scan_dtype(a, dtype):
    if dtype is not None:
        return dtype
    return torch.int64 if is_integral(a.dtype) else a.dtype


@register_decomposition(aten.cumsum.default)
def cumsum(a, dim, *, dtype=None):
    return _on_1d(prims.cumsum, convert(a, _scan_dtype(a, dtype)), dim)


@register_decomposition(aten.cumprod.default)
def cumprod(a, dim, *, dtype=None):
    return _on_1d(prims.cumprod, convert(a, _scan_dtype(a, dtype)), dim)


@register_decomposition(aten.logcumsumexp.default)
def logcumsumexp(a, dim):
    return _on_1d(prims.logcumsumexp, a, dim)


@register_decomposition(aten.cummax.default)
def cummax(a, dim):
    return _on_1d(prims.cummax, a, dim)


@register_decomposition(aten.cummin.default)
def cummin(a, dim):
    return _on_1d(prims.cummin, a, dim)


@register_decomposition(aten.sort.default, aten.sort.stable)
def sort(a, dim=-1, descending=False, *, stable=None):
    return _on_1d(lambda x, d: prims.sort(x, d, descending, bool(stable)), a, dim)


@register_decomposition(aten.topk.default)
def topk(a, k, dim=-1, largest=True, sorted=True):
    d = canonical_dim(dim, a.dim()) if a.dim() else 0
    length = a.shape[d] if a.dim() else 1
    if not 0 <= k <= length:
        raise RuntimeError("selected index k out of range")
    values, indices = sort(a, d, largest, stable=True)
    if a.dim() == 0:
        return values, indices
    return aten.slice.Tensor(values, d, 0, k), aten.slice.Tensor(indices, d, 0, k)


def _pick(values, indices, d, position, keepdim):
    """values/indices at ``position`` (an int or an index tensor with d kept) along ``d``."""
    if isinstance(position, int):
        v = aten.select.int(values, d, position)
        i = aten.select.int(indices, d, position)
        return keep_dims(v, [d], keepdim), keep_dims(i, [d], keepdim)
    v = prims.gather(values, d, position)
    i = prims.gather(indices, d, position)
    if not keepdim:
        v, i = prims.squeeze(v, [d]), prims.squeeze(i, [d])
    return v, i


@register_decomposition(aten.kthvalue.default)
def kthvalue(a, k, dim=-1, keepdim=False):
    if a.dim() == 0:
        return prims.clone(a), prims.full([], 0, dtype=torch.int64, device=a.device)
    d = canonical_dim(dim, a.dim())
    if not 1 <= k <= a.shape[d]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    values, indices = sort(a, d, False, stable=True)
    return _pick(values, indices, d, k - 1, keepdim)


def _median_position(values, d, ignore_nan):
    """Index (d kept) of the lower median of each row of sorted ``values``; NaNs sort last."""
    nan = prims.isnan(values) if values.dtype.is_floating_point else None
    n = values.shape[d]
    if nan is None:
        pos = prims.full([], (n - 1) // 2, dtype=torch.int64, device=values.device)
        shape = list(values.shape)
        shape[d] = 1
        return prims.broadcast_in_dim(pos, shape, [])
    valid = prims.sum(convert(prims.logical_not(nan), torch.int64), [d])
    if ignore_nan:
        pos = prims.floor_divide(prims.sub(valid, scalar(1, valid)), scalar(2, valid))
        pos = prims.maximum(pos, scalar(0, pos))
    else:
        # With a NaN in the row the median is the first NaN, which sorts at index `valid`.
        has_nan = prims.lt(valid, scalar(n, valid))
        pos = prims.where(has_nan, valid, scalar((n - 1) // 2, valid))
    return prims.expand_dims(pos, [d])


def _median_dim(a, dim, keepdim, ignore_nan):
    if a.dim() == 0:
        return prims.clone(a), prims.full([], 0, dtype=torch.int64, device=a.device)
    d = canonical_dim(dim, a.dim())
    if a.shape[d] == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    values, indices = sort(a, d, False, stable=True)
    return _pick(values, indices, d, _median_position(values, d, ignore_nan), keepdim)


@register_decomposition(aten.median.dim)
def median_dim(a, dim, keepdim=False):
    return _median_dim(a, dim, keepdim, ignore_nan=False)


@register_decomposition(aten.nanmedian.dim)
def nanmedian_dim(a, dim, keepdim=False):
    return _median_dim(a, dim, keepdim, ignore_nan=True)


@register_decomposition(aten.median.default)
def median(a):
    flat = prims.reshape(a, [a.numel()])
    if a.numel() == 0:
        return prims.full([], float("nan"), dtype=a.dtype, device=a.device)
    return _median_dim(flat, 0, False, ignore_nan=False)[0]


@register_decomposition(aten.nanmedian.default)
def nanmedian(a):
    flat = prims.reshape(a, [a.numel()])
    if a.numel() == 0:
        return prims.full([], float("nan"), dtype=a.dtype, device=a.device)
    return _median_dim(flat, 0, False, ignore_nan=True)[0]
