"""Indexing prims: gather/scatter along a dim, index_select, advanced indexing, searchsorted.

Indices are int64 tensors. Out-of-range indices are detected by the reference (aten) kernels at
run time; the meta functions check everything that shapes and dtypes determine.
"""

from __future__ import annotations

import torch

from ._checks import (
    canonical_dim,
    check_dtype,
    check_same_dtype,
    check_tensor,
    common_device,
    empty_contiguous,
    empty_like_layout,
)
from ._registry import define_prim, fail


def _check_index(p: str, index, what: str = "index") -> torch.Tensor:
    check_tensor(p, index, what)
    if index.dtype != torch.int64:
        fail(p, f"{what} must be int64, got {index.dtype}", dtype=True)
    return index


def _gather_meta(a, dim, index):
    p = "gather"
    check_tensor(p, a)
    _check_index(p, index)
    dim = canonical_dim(p, dim, a.ndim)
    if index.ndim != a.ndim and not (a.ndim == 0 and index.ndim <= 1):
        fail(p, f"index has {index.ndim} dims, a has {a.ndim}")
    for d in range(index.ndim):
        if d != dim and a.ndim and index.shape[d] > a.shape[d]:
            fail(p, f"index size {index.shape[d]} exceeds a's size {a.shape[d]} in dim {d}")
    return empty_contiguous(index.shape, a.dtype, a.device)


define_prim(
    "gather(Tensor a, int dim, Tensor index) -> Tensor",
    "indexing",
    _gather_meta,
    lambda a, dim, index: torch.gather(a, dim, index),
    notes="out[i][j] = a[index[i][j]][j] (dim 0)",
    eager=lambda a, dim, index: torch.gather(a, dim, index),
)


def _scatter_check(p: str, a, dim, index, src) -> None:
    check_tensor(p, a)
    _check_index(p, index)
    check_tensor(p, src, "src")
    check_same_dtype(p, [a, src])
    canonical_dim(p, dim, a.ndim)
    if not (index.ndim == a.ndim == src.ndim or a.ndim == 0):
        fail(
            p,
            f"a, index and src need the same number of dims, got {a.ndim}, {index.ndim}, "
            f"{src.ndim}",
        )
    for d in range(index.ndim):
        if a.ndim and index.shape[d] > src.shape[d]:
            fail(p, f"index size {index.shape[d]} exceeds src's size {src.shape[d]} in dim {d}")


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _scatter_meta(name: str):
    def meta(a, dim, index, src, *rest):
        _scatter_check(name, a, dim, index, src)
        if name == "scatter_reduce" and rest[0] not in _REDUCES:
            fail(name, f"reduce must be one of {_REDUCES}, got {rest[0]!r}")
        return empty_like_layout(a)

    return meta


define_prim(
    "scatter(Tensor a, int dim, Tensor index, Tensor src) -> Tensor",
    "indexing",
    _scatter_meta("scatter"),
    lambda a, dim, index, src: torch.scatter(a, dim, index, src),
    notes="copy of a with src written at index (duplicate indices: unspecified winner)",
    eager=lambda a, dim, index, src: torch.scatter(a, dim, index, src),
)
define_prim(
    "scatter_add(Tensor a, int dim, Tensor index, Tensor src) -> Tensor",
    "indexing",
    _scatter_meta("scatter_add"),
    lambda a, dim, index, src: torch.scatter_add(a, dim, index, src),
    notes="copy of a with src added at index",
    eager=lambda a, dim, index, src: torch.scatter_add(a, dim, index, src),
)
define_prim(
    "scatter_reduce(Tensor a, int dim, Tensor index, Tensor src, str reduce, bool include_self)"
    " -> Tensor",
    "indexing",
    _scatter_meta("scatter_reduce"),
    lambda a, dim, index, src, reduce, include_self: torch.scatter_reduce(
        a, dim, index, src, reduce, include_self=include_self
    ),
    notes="reduce: sum, prod, mean, amax, amin",
    eager=lambda a, dim, index, src, reduce, include_self: torch.scatter_reduce(
        a, dim, index, src, reduce, include_self=include_self
    ),
)


def _index_select_meta(a, dim, index):
    p = "index_select"
    check_tensor(p, a)
    _check_index(p, index)
    if index.ndim > 1:
        fail(p, f"index must be 0-d or 1-d, got {index.ndim}-d")
    dim = canonical_dim(p, dim, a.ndim)
    shape = list(a.shape)
    if shape:
        shape[dim] = index.numel()
    return empty_contiguous(shape, a.dtype, a.device)


define_prim(
    "index_select(Tensor a, int dim, Tensor index) -> Tensor",
    "indexing",
    _index_select_meta,
    lambda a, dim, index: torch.index_select(a, dim, index),
    notes="a with dim replaced by the selected entries",
    eager=lambda a, dim, index: torch.index_select(a, dim, index),
)


def _check_indices(p: str, a, indices) -> None:
    check_tensor(p, a)
    if len(indices) > a.ndim:
        fail(p, f"{len(indices)} indices for a {a.ndim}-d tensor")
    for i, index in enumerate(indices):
        if index is not None:
            _check_index(p, index, f"indices[{i}]")


def _index_meta(a, indices):
    _check_indices("index", a, indices)
    shape = torch.ops.aten.index.Tensor(
        torch.empty(a.shape, device="meta"),
        [
            None if i is None else torch.empty(i.shape, dtype=i.dtype, device="meta")
            for i in indices
        ],
    ).shape
    return empty_contiguous(shape, a.dtype, a.device)


define_prim(
    "index(Tensor a, Tensor?[] indices) -> Tensor",
    "indexing",
    _index_meta,
    lambda a, indices: torch.ops.aten.index.Tensor(a, indices),
    notes="advanced indexing a[indices] with int64 index tensors (None = full slice)",
    eager=lambda a, indices: torch.ops.aten.index.Tensor(a, indices),
)


def _index_put_meta(a, indices, values, accumulate):
    p = "index_put"
    _check_indices(p, a, indices)
    check_tensor(p, values, "values")
    check_same_dtype(p, [a, values])
    return empty_like_layout(a)


define_prim(
    "index_put(Tensor a, Tensor?[] indices, Tensor values, bool accumulate) -> Tensor",
    "indexing",
    _index_put_meta,
    lambda a, indices, values, accumulate: torch.ops.aten.index_put(a, indices, values, accumulate),
    notes="copy of a with a[indices] = values (or += with accumulate)",
    eager=lambda a, indices, values, accumulate: torch.ops.aten.index_put(
        a, indices, values, accumulate
    ),
)


def _index_update_meta(name: str):
    def meta(a, dim, index, source):
        check_tensor(name, a)
        _check_index(name, index)
        check_tensor(name, source, "source")
        check_same_dtype(name, [a, source])
        dim = canonical_dim(name, dim, a.ndim)
        if index.ndim > 1:
            fail(name, f"index must be 0-d or 1-d, got {index.ndim}-d")
        expected = list(a.shape)
        if expected:
            expected[dim] = index.numel()
        if list(source.shape) != expected:
            fail(name, f"source shape {list(source.shape)} must be {expected}")
        return empty_like_layout(a)

    return meta


define_prim(
    "index_add(Tensor a, int dim, Tensor index, Tensor source) -> Tensor",
    "indexing",
    _index_update_meta("index_add"),
    lambda a, dim, index, source: torch.index_add(a, dim, index, source),
    notes="copy of a with source slices added at index along dim",
    eager=lambda a, dim, index, source: torch.index_add(a, dim, index, source),
)
define_prim(
    "index_copy(Tensor a, int dim, Tensor index, Tensor source) -> Tensor",
    "indexing",
    _index_update_meta("index_copy"),
    lambda a, dim, index, source: torch.index_copy(a, dim, index, source),
    notes="copy of a with source slices written at index along dim",
    eager=lambda a, dim, index, source: torch.index_copy(a, dim, index, source),
)


def _searchsorted_meta(sorted_sequence, values, right):
    p = "searchsorted"
    check_tensor(p, sorted_sequence, "sorted_sequence")
    check_tensor(p, values, "values")
    check_same_dtype(p, [sorted_sequence, values])
    check_dtype(p, values, "real")
    if sorted_sequence.ndim == 0:
        fail(p, "sorted_sequence must have at least one dim")
    if sorted_sequence.ndim > 1 and list(sorted_sequence.shape[:-1]) != list(values.shape[:-1]):
        fail(
            p,
            f"leading dims of sorted_sequence {list(sorted_sequence.shape)} and values "
            f"{list(values.shape)} differ",
        )
    return empty_contiguous(values.shape, torch.int64, common_device(p, [values, sorted_sequence]))


define_prim(
    "searchsorted(Tensor sorted_sequence, Tensor values, bool right) -> Tensor",
    "indexing",
    _searchsorted_meta,
    lambda s, v, right: torch.searchsorted(s, v, right=right),
    notes="int64 insertion points along the last dim (1-d sequence: shared by all values)",
    eager=lambda s, v, right: torch.searchsorted(s, v, right=right),
)
