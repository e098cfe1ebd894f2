"""Shape prims: fresh (non-aliasing) tensors whose elements are rearranged or combined."""

from __future__ import annotations

import torch

from ._checks import (
    canonical_dim,
    canonical_dims,
    check_int_list,
    check_same_dtype,
    check_tensor,
    common_device,
    empty_contiguous,
    empty_like_layout,
)
from ._registry import define_prim, fail
from .views import check_collapse


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _reshape_meta(a, shape):
    check_tensor("reshape", a)
    check_int_list("reshape", shape, "shape")
    if _numel(shape) != a.numel():
        fail("reshape", f"cannot reshape {list(a.shape)} ({a.numel()} elements) to {list(shape)}")
    return empty_contiguous(shape, a.dtype, a.device)


define_prim(
    "reshape(Tensor a, SymInt[] shape) -> Tensor",
    "shape",
    _reshape_meta,
    lambda a, shape: a.reshape(shape).clone(memory_format=torch.contiguous_format),
    notes="contiguous copy with the new shape (no -1)",
    eager=lambda a, shape: a.reshape(shape),
)


def _collapse_meta(a, start, end):
    check_collapse("collapse", a, start, end)
    shape = list(a.shape) or [1]
    length = _numel(shape[start:end])
    return empty_contiguous([*shape[:start], length, *shape[end:]], a.dtype, a.device)


def _collapse(a, start, end):
    shape = list(a.shape) or [1]
    return a.reshape([*shape[:start], -1, *shape[end:]]).clone(
        memory_format=torch.contiguous_format
    )


define_prim(
    "collapse(Tensor a, int start, int end) -> Tensor",
    "shape",
    _collapse_meta,
    _collapse,
    notes="merges dims [start, end) (end exclusive) into a contiguous copy",
    eager=lambda a, start, end: a.flatten(start, end - 1) if a.ndim else a.reshape(1),
)


def _rev_meta(a, dims):
    check_tensor("rev", a)
    canonical_dims("rev", dims, a.ndim)
    return empty_like_layout(a)


define_prim(
    "rev(Tensor a, int[] dims) -> Tensor",
    "shape",
    _rev_meta,
    lambda a, dims: torch.flip(a, list(dims)) if dims else a.clone(),
    notes="reverses the listed dims",
    eager=lambda a, dims: torch.flip(a, list(dims)),
)


def _roll_meta(a, shifts, dims):
    check_tensor("roll", a)
    canonical_dims("roll", dims, a.ndim)
    if len(shifts) != len(dims):
        fail("roll", f"{len(shifts)} shifts for {len(dims)} dims")
    return empty_like_layout(a)


define_prim(
    "roll(Tensor a, SymInt[] shifts, int[] dims) -> Tensor",
    "shape",
    _roll_meta,
    lambda a, shifts, dims: torch.roll(a, list(shifts), list(dims)) if dims else a.clone(),
    notes="rotates each listed dim by its shift: out[i] = a[(i - shift) mod n]",
    eager=lambda a, shifts, dims: torch.roll(a, list(shifts), list(dims)),
)


def _cat_meta(tensors, dim):
    p = "cat"
    if not tensors:
        fail(p, "needs at least one tensor")
    ts = [check_tensor(p, t, f"tensor {i}") for i, t in enumerate(tensors)]
    dtype = check_same_dtype(p, ts)
    first = ts[0]
    dim = canonical_dim(p, dim, first.ndim)
    for i, t in enumerate(ts):
        if t.ndim != first.ndim or any(
            t.shape[d] != first.shape[d] for d in range(t.ndim) if d != dim
        ):
            fail(
                p,
                f"tensor {i} has shape {list(t.shape)}, expected {list(first.shape)} "
                f"except in dim {dim}",
            )
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in ts)
    return empty_contiguous(shape, dtype, common_device(p, ts))


define_prim(
    "cat(Tensor[] tensors, int dim) -> Tensor",
    "shape",
    _cat_meta,
    lambda tensors, dim: torch.cat(tensors, dim),
    notes="same dtype and rank; contiguous result",
    eager=lambda tensors, dim: torch.cat(tensors, dim),
)


def _padded_size(n: int, low: int, high: int, interior: int) -> int:
    return low + high + (n + (n - 1) * interior if n > 0 else 0)


def _pad_meta(a, value, low, high, interior):
    p = "pad"
    check_tensor(p, a)
    if not len(low) == len(high) == len(interior) == a.ndim:
        fail(p, f"low/high/interior need one entry per dim ({a.ndim})")
    check_int_list(p, interior, "interior")
    shape = [
        _padded_size(n, lo, hi, it)
        for n, lo, hi, it in zip(a.shape, low, high, interior, strict=False)
    ]
    if any(s < 0 for s in shape):
        fail(p, f"cropping more than the padded size: result shape {shape}")
    return empty_contiguous(shape, a.dtype, a.device)


def _pad(a, value, low, high, interior):
    # Pad with max(low, 0)/max(high, 0) and interior spacing, then crop the negative parts.
    grown = [
        _padded_size(n, max(lo, 0), max(hi, 0), it)
        for n, lo, hi, it in zip(a.shape, low, high, interior, strict=False)
    ]
    out = torch.full(grown, value, dtype=a.dtype, device=a.device)
    target = tuple(
        slice(max(lo, 0), max(lo, 0) + _padded_size(n, 0, 0, it), it + 1)
        for n, lo, it in zip(a.shape, low, interior, strict=False)
    )
    out[target] = a
    crop = tuple(
        slice(max(-lo, 0), g - max(-hi, 0)) for g, lo, hi in zip(grown, low, high, strict=False)
    )
    return out[crop].clone(memory_format=torch.contiguous_format)


define_prim(
    "pad(Tensor a, Scalar value, SymInt[] low, SymInt[] high, SymInt[] interior) -> Tensor",
    "shape",
    _pad_meta,
    _pad,
    notes="per dim: low/high padding (negative crops) and interior padding between elements",
)


_MEMORY_FORMATS = {
    torch.contiguous_format: None,
    torch.channels_last: 4,
    torch.channels_last_3d: 5,
}


def _clone_meta(a, *, memory_format=None):
    p = "clone"
    check_tensor(p, a)
    if memory_format in (None, torch.preserve_format):
        return empty_like_layout(a)
    if memory_format not in _MEMORY_FORMATS:
        fail(p, f"unsupported memory_format {memory_format}")
    rank = _MEMORY_FORMATS[memory_format]
    if rank is not None and a.ndim != rank:
        fail(p, f"{memory_format} needs a {rank}-d tensor, got {a.ndim}-d")
    return torch.empty(a.shape, dtype=a.dtype, device=a.device, memory_format=memory_format)


define_prim(
    "clone(Tensor a, *, MemoryFormat? memory_format=None) -> Tensor",
    "shape",
    _clone_meta,
    lambda a, *, memory_format=None: a.clone(memory_format=memory_format or torch.preserve_format),
    notes="None/preserve: dense layout like a; else the given format",
    eager=lambda a, *, memory_format=None: a.clone(
        memory_format=memory_format or torch.preserve_format
    ),
)


def _copy_strided_meta(a, stride):
    p = "copy_strided"
    check_tensor(p, a)
    if len(stride) != a.ndim:
        fail(p, f"stride {list(stride)} needs one entry per dim ({a.ndim})")
    check_int_list(p, stride, "stride")
    return torch.empty_strided(a.shape, stride, dtype=a.dtype, device=a.device)


def _copy_strided(a, stride):
    out = torch.empty_strided(a.shape, stride, dtype=a.dtype, device=a.device)
    out.copy_(a)
    return out


define_prim(
    "copy_strided(Tensor a, SymInt[] stride) -> Tensor",
    "shape",
    _copy_strided_meta,
    _copy_strided,
    notes="copy of a with exactly the given strides",
    eager=lambda a, stride: a.clone(),
)


def _scatter_target_check(p: str, a, src) -> None:
    check_tensor(p, a)
    check_tensor(p, src, "src")
    check_same_dtype(p, [a, src])


def _as_strided_scatter_meta(a, src, size, stride, storage_offset):
    p = "as_strided_scatter"
    _scatter_target_check(p, a, src)
    if list(src.shape) != list(size):
        fail(p, f"src shape {list(src.shape)} must equal size {list(size)}")
    if len(size) != len(stride):
        fail(p, f"size {list(size)} and stride {list(stride)} differ in length")
    if all(s > 0 for s in size):
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride, strict=False))
        if storage_offset < 0 or last >= a.numel():
            fail(p, f"the view reaches element {last}, outside a's {a.numel()} elements")
    return empty_contiguous(a.shape, a.dtype, a.device)


def _as_strided_scatter(a, src, size, stride, storage_offset):
    # Offsets and strides address a's elements in row-major order (a as if contiguous).
    out = a.clone(memory_format=torch.contiguous_format)
    out.as_strided(size, stride, storage_offset).copy_(src)
    return out


define_prim(
    "as_strided_scatter(Tensor a, Tensor src, SymInt[] size, SymInt[] stride,"
    " SymInt storage_offset) -> Tensor",
    "shape",
    _as_strided_scatter_meta,
    _as_strided_scatter,
    notes="copy of a (row-major) with the as_strided view replaced by src",
    eager=lambda a, src, size, stride, off: torch.as_strided_scatter(
        a.contiguous(), src, size, stride, off
    ),
)


def _slice_scatter_meta(a, src, dim, start, end, step):
    p = "slice_scatter"
    _scatter_target_check(p, a, src)
    dim = canonical_dim(p, dim, a.ndim)
    if not 0 <= start <= end <= a.shape[dim] or step <= 0:
        fail(p, f"need 0 <= start {start} <= end {end} <= {a.shape[dim]} and step {step} > 0")
    expected = list(a.shape)
    expected[dim] = (end - start + step - 1) // step
    if list(src.shape) != expected:
        fail(p, f"src shape {list(src.shape)} must be {expected}")
    return empty_like_layout(a)


define_prim(
    "slice_scatter(Tensor a, Tensor src, int dim, SymInt start, SymInt end, SymInt step) -> Tensor",
    "shape",
    _slice_scatter_meta,
    lambda a, src, dim, start, end, step: torch.slice_scatter(a, src, dim, start, end, step),
    notes="copy of a with a[start:end:step] along dim replaced by src",
    eager=lambda a, src, dim, start, end, step: torch.slice_scatter(a, src, dim, start, end, step),
)


def _diagonal_scatter_meta(a, src, offset, dim1, dim2):
    p = "diagonal_scatter"
    _scatter_target_check(p, a, src)
    if a.ndim < 2:
        fail(p, f"needs at least 2 dims, got {a.ndim}")
    d1, d2 = canonical_dims(p, [dim1, dim2], a.ndim)
    expected = list(torch.diagonal(torch.empty(a.shape, device="meta"), offset, d1, d2).shape)
    if list(src.shape) != expected:
        fail(p, f"src shape {list(src.shape)} must be {expected}")
    return empty_like_layout(a)


define_prim(
    "diagonal_scatter(Tensor a, Tensor src, int offset, int dim1, int dim2) -> Tensor",
    "shape",
    _diagonal_scatter_meta,
    lambda a, src, offset, d1, d2: torch.diagonal_scatter(a, src, offset, d1, d2),
    notes="copy of a with its diagonal replaced by src",
    eager=lambda a, src, offset, d1, d2: torch.diagonal_scatter(a, src, offset, d1, d2),
)
