"""Scan prims (cumulative ops along one dim) and sort. Results keep the input's dense layout."""

from __future__ import annotations

import torch

from ._checks import canonical_dim, check_dtype, check_tensor, empty_contiguous, empty_like_layout
from ._registry import define_prim, fail


def _scan_meta(name: str, dtype_class: str, with_indices: bool):
    def meta(a, dim, *flags):
        check_tensor(name, a)
        check_dtype(name, a, dtype_class)
        canonical_dim(name, dim, a.ndim)
        values = empty_like_layout(a)
        if with_indices:
            return values, empty_like_layout(a, dtype=torch.int64)
        return values

    return meta


for _name, _ref, _cls, _notes in (
    ("cumsum", lambda a, dim: torch.cumsum(a, dim, dtype=a.dtype), "number", "input dtype"),
    ("cumprod", lambda a, dim: torch.cumprod(a, dim, dtype=a.dtype), "number", "input dtype"),
    ("logcumsumexp", torch.logcumsumexp, "float", "log(cumsum(exp(a)))"),
):
    define_prim(
        f"{_name}(Tensor a, int dim) -> Tensor",
        "scan",
        _scan_meta(_name, _cls, False),
        _ref,
        notes=_notes,
        eager=_ref,
    )

for _name, _ref in (("cummax", torch.cummax), ("cummin", torch.cummin)):
    define_prim(
        f"{_name}(Tensor a, int dim) -> (Tensor, Tensor)",
        "scan",
        _scan_meta(_name, "real_bool", True),
        lambda a, dim, _ref=_ref: tuple(_ref(a, dim)),
        notes="(values, int64 indices); ties pick the last index like eager",
        eager=lambda a, dim, _ref=_ref: tuple(_ref(a, dim)),
    )


def _sort(a, dim, descending, stable):
    return tuple(torch.sort(a, dim=dim, descending=descending, stable=stable))


define_prim(
    "sort(Tensor a, int dim, bool descending, bool stable) -> (Tensor, Tensor)",
    "scan",
    _scan_meta("sort", "real_bool", True),
    _sort,
    notes="(values, int64 indices); NaN sorts as the largest value",
    eager=_sort,
)


def _topk_meta(a, k, dim, largest):
    p = "topk"
    check_tensor(p, a)
    check_dtype(p, a, "real")
    dim = canonical_dim(p, dim, a.ndim)
    size = a.shape[dim] if a.ndim else 1
    if not 0 <= k <= size:
        fail(p, f"k = {k} is out of range for a dim of size {size}")
    shape = list(a.shape)
    if shape:
        shape[dim] = k
    return (
        empty_contiguous(shape, a.dtype, a.device),
        empty_contiguous(shape, torch.int64, a.device),
    )


def _topk(a, k, dim, largest):
    return tuple(torch.topk(a, k, dim, largest=largest, sorted=True))


define_prim(
    "topk(Tensor a, int k, int dim, bool largest) -> (Tensor, Tensor)",
    "scan",
    _topk_meta,
    _topk,
    notes="the k largest (or smallest) values along dim, sorted, with int64 indices",
    eager=_topk,
)


def _kthvalue_meta(a, k, dim):
    p = "kthvalue"
    check_tensor(p, a)
    check_dtype(p, a, "real")
    dim = canonical_dim(p, dim, a.ndim)
    size = a.shape[dim] if a.ndim else 1
    if not 1 <= k <= size:
        fail(p, f"k = {k} is out of range [1, {size}]")
    shape = [n for d, n in enumerate(a.shape) if d != dim]
    return (
        empty_contiguous(shape, a.dtype, a.device),
        empty_contiguous(shape, torch.int64, a.device),
    )


define_prim(
    "kthvalue(Tensor a, int k, int dim) -> (Tensor, Tensor)",
    "scan",
    _kthvalue_meta,
    lambda a, k, dim: tuple(torch.kthvalue(a, k, dim)),
    notes="k-th smallest value along dim (removed) and its int64 index",
    eager=lambda a, k, dim: tuple(torch.kthvalue(a, k, dim)),
)
