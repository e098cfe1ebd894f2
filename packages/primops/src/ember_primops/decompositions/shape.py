"""Shape ops that produce fresh tensors: cat/stack/pad/flip/roll/repeat/tril/*_scatter..."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import convert, result_type

aten = torch.ops.aten


@register_decomposition(aten.cat.default)
def cat(tensors: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    dtype = result_type(*[t if t.dim() else prims.expand_dims(t, [0]) for t in tensors])
    # Legacy rule: 1-D empty tensors are skipped whatever the other shapes are.
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    if not kept:
        return prims.clone(convert(tensors[0], dtype))
    for t in kept:
        if t.dim() == 0:
            raise RuntimeError("zero-dimensional tensor cannot be concatenated")
    dim = canonical_dim(dim, kept[0].dim())
    out = prims.cat([convert(t, dtype) for t in kept], dim)
    memory_format = _common_memory_format(kept)
    if memory_format is not None:  # eager's cat keeps the layout its inputs share
        return prims.clone(out, memory_format=memory_format)
    return out


def _common_memory_format(tensors: Sequence[torch.Tensor]):
    """channels_last(_3d) when every input is laid out so and not also contiguous, as eager's
    cat picks its output's strides; None (contiguous) otherwise."""
    formats = set()
    for t in tensors:
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
        laid_out = fmt is not None and t.is_contiguous(memory_format=fmt)
        formats.add(fmt if laid_out and not t.is_contiguous() else None)
    return formats.pop() if len(formats) == 1 else None


@register_decomposition(aten.stack.default)
def stack(tensors: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    dim = canonical_dim(dim, tensors[0].dim() + 1)
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                f"at entry 0 and {list(t.shape)} at another entry"
            )
    return cat([prims.expand_dims(t, [dim]) for t in tensors], dim)


@register_decomposition(aten.constant_pad_nd.default)
def constant_pad_nd(a: torch.Tensor, pad: Sequence[int], value=0) -> torch.Tensor:
    if len(pad) % 2 or len(pad) // 2 > a.dim():
        raise RuntimeError(
            f"Length of pad must be even but instead it equals {len(pad)}"
            if len(pad) % 2
            else "Length of pad should be no more than twice the number of dimensions of the input."
        )
    low, high = [0] * a.dim(), [0] * a.dim()
    for i in range(len(pad) // 2):
        low[a.dim() - 1 - i] = pad[2 * i]
        high[a.dim() - 1 - i] = pad[2 * i + 1]
    for d in range(a.dim()):
        if a.shape[d] + low[d] + high[d] < 0:
            raise RuntimeError(
                f"The input size {a.shape[d]}, plus negative padding {low[d]} and {high[d]} "
                f"resulted in a negative output size, which is invalid. Check dimension {d}"
            )
    return prims.pad(a, value, low, high, [0] * a.dim())


@register_decomposition(aten.flip.default)
def flip(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    dims = sorted({canonical_dim(d, a.dim()) for d in dims})
    return prims.rev(a, dims) if a.dim() else prims.clone(a)


def _static_shifts(a, shifts, dims) -> dict[int, int] | None:
    """{dim: shift in [0, n)} of the dims a roll moves (a dim listed twice moves by the sum),
    or None where a shift or a size is symbolic."""
    moved: dict[int, int] = {}
    for shift, dim in zip(shifts, dims, strict=True):
        dim = canonical_dim(dim, a.dim())
        n = a.shape[dim]
        if not (isinstance(shift, int) and isinstance(n, int)):
            return None
        if n:
            moved[dim] = (moved.get(dim, 0) + shift) % n
    return {d: s for d, s in moved.items() if s}


@register_decomposition(aten.roll.default)
def roll(a: torch.Tensor, shifts: Sequence[int], dims: Sequence[int] = ()) -> torch.Tensor:
    shifts, dims = list(shifts), list(dims)
    if not dims:
        flat = prims.reshape(a, [a.numel()])
        return prims.reshape(roll(flat, shifts, [0]), list(a.shape))
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    moved = _static_shifts(a, shifts, dims)
    if moved is not None:
        # one index map (out[i] = a[(i - s) mod n]): Swin's shifted windows roll a
        # layer norm's output over H and W; as two cats of slices its readers carried the
        # norm four times over, each under a mask, in one kernel
        if not moved:
            return prims.clone(a)
        return prims.roll(a, list(moved.values()), list(moved))
    out = a
    for shift, dim in zip(shifts, dims, strict=True):
        dim = canonical_dim(dim, a.dim())
        n = a.shape[dim]
        if n == 0:
            continue
        s = shift % n
        if s == 0:
            continue
        out = prims.cat(
            [aten.slice.Tensor(out, dim, n - s, n), aten.slice.Tensor(out, dim, 0, n - s)], dim
        )
    return out if out is not a else prims.clone(a)


@register_decomposition(aten.repeat.default)
def repeat(a: torch.Tensor, repeats: Sequence[int]) -> torch.Tensor:
    repeats = list(repeats)
    if len(repeats) < a.dim():
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            "of tensor"
        )
    lead = len(repeats) - a.dim()
    shape = [1] * lead + list(a.shape)
    x = prims.reshape(a, shape)
    # Interleave a broadcast dim of size r before every dim, then merge the pairs.
    x = prims.expand_dims(x, list(range(0, 2 * len(shape), 2)))
    expanded = [v for r, s in zip(repeats, shape, strict=True) for v in (r, s)]
    x = prims.broadcast_in_dim(x, expanded, list(range(len(expanded))))
    return prims.reshape(x, [r * s for r, s in zip(repeats, shape, strict=True)])


def _triangle_mask(a: torch.Tensor, diagonal: int, lower: bool) -> torch.Tensor:
    rows, cols = a.shape[-2], a.shape[-1]
    r = prims.broadcast_in_dim(
        prims.iota(rows, start=0, step=1, dtype=torch.int64, device=a.device), [rows, cols], [0]
    )
    c = prims.broadcast_in_dim(
        prims.iota(cols, start=0, step=1, dtype=torch.int64, device=a.device), [rows, cols], [1]
    )
    shifted = prims.add(r, scalar(diagonal, r))
    return prims.ge(shifted, c) if lower else prims.le(shifted, c)


def _triangle(a, diagonal, lower, name):
    if a.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    mask = _triangle_mask(a, diagonal, lower)
    return prims.where(mask, a, scalar(0, a))


@register_decomposition(aten.tril.default)
def tril(a: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    return _triangle(a, diagonal, True, "tril")


@register_decomposition(aten.triu.default)
def triu(a: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    return _triangle(a, diagonal, False, "triu")


def _clamp_range(start, end, length):
    start = 0 if start is None else start
    end = length if end is None else end
    start = min(max(start + length if start < 0 else start, 0), length)
    end = min(max(end + length if end < 0 else end, start), length)
    return start, end


@register_decomposition(aten.slice_scatter.default)
def slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    dim = canonical_dim(dim, a.dim())
    start, end = _clamp_range(start, end, a.shape[dim])
    return prims.slice_scatter(a, convert(src, a.dtype), dim, start, end, step)


@register_decomposition(aten.select_scatter.default)
def select_scatter(a, src, dim, index):
    dim = canonical_dim(dim, a.dim())
    index = index % a.shape[dim]
    return prims.slice_scatter(
        a, prims.expand_dims(convert(src, a.dtype), [dim]), dim, index, index + 1, 1
    )


def _dense_format(a):
    """The memory format ``a`` is dense in (contiguous or channels-last), else None."""
    if a.is_contiguous():
        return torch.contiguous_format
    if a.dim() == 4 and a.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    return None


def _reshapes_all_of(a, size, stride, offset) -> bool:
    """Whether ``as_strided(a, size, stride, offset)`` is a row-major reshape of all of a
    contiguous ``a`` (static sizes)."""
    values = [*size, *stride, offset, *a.shape, a.storage_offset()]
    if not all(isinstance(v, int) for v in values) or not a.is_contiguous():
        return False
    if offset != a.storage_offset() or a.numel() != math.prod(size):
        return False
    expected = 1
    for n, st in reversed(list(zip(size, stride, strict=True))):
        if n > 1 and st != expected:
            return False
        expected *= n
    return True


def _views_all_of(a, size, stride, offset) -> bool:
    """Whether ``as_strided(a, size, stride, offset)`` is ``a`` itself (static sizes: the
    same sizes, the same strides where a size exceeds 1, a's offset)."""
    values = [*size, *stride, offset, *a.shape, *a.stride(), a.storage_offset()]
    if not all(isinstance(v, int) for v in values):
        return False  # symbolic: comparing would specialize the sizes
    if list(size) != list(a.shape) or offset != a.storage_offset():
        return False
    return all(
        n <= 1 or st == a.stride(d) for d, (n, st) in enumerate(zip(size, stride, strict=True))
    )


@register_decomposition(aten.as_strided_scatter.default)
def as_strided_scatter(a, src, size, stride, storage_offset=None):
    offset = a.storage_offset() if storage_offset is None else storage_offset
    src = convert(src, a.dtype)
    layout = _dense_format(a)
    if layout is not None and _views_all_of(a, size, stride, offset):
        # a write through a view that is all of ``a`` in its own order (``x += y`` on a
        # whole-tensor slice): the result is ``src`` elementwise with a's strides, a loop
        # body that fuses with its readers, not a library scatter pinning a's layout
        return prims.clone(src, memory_format=layout)
    if _reshapes_all_of(a, size, stride, offset):
        # a write through a reshaped view of all of a contiguous ``a`` (MobileBERT's
        # ``logits += bias`` on a matmul's [B, L, V] view of its [B * L, V] result): src in
        # a's shape, the same elements in the same order; as a library scatter it was a
        # third copy of the logits beside the matmul's and the add's
        return prims.clone(prims.reshape(src, list(a.shape)), memory_format=layout)
    # aten addresses a's memory (its clone keeps a's strides), the prim a's row-major order:
    # for a dense permuted a (index_add's result, written in place by a backward formula)
    # scatter into a in memory order, then permute back
    order = sorted(range(a.dim()), key=lambda d: -a.stride(d))
    if not a.is_contiguous() and order != list(range(a.dim())):
        in_memory = prims.permute(a, order)
        if in_memory.is_contiguous():
            out = prims.as_strided_scatter(in_memory, src, list(size), list(stride), offset)
            return prims.permute(out, [order.index(d) for d in range(a.dim())])
    return prims.as_strided_scatter(a, src, list(size), list(stride), offset)


@register_decomposition(aten.diagonal_scatter.default)
def diagonal_scatter(a, src, offset=0, dim1=0, dim2=1):
    # Write through a diagonal view of a contiguous copy, expressed as as_strided_scatter.
    base = prims.clone(a, memory_format=torch.contiguous_format)
    view = prims.diagonal(base, offset, dim1, dim2)
    return prims.as_strided_scatter(
        base, convert(src, a.dtype), list(view.shape), list(view.stride()), view.storage_offset()
    )


@register_decomposition(aten.rot90.default)
def rot90(a, k=1, dims=(0, 1)):
    d0, d1 = (canonical_dim(d, a.dim()) for d in dims)
    k %= 4
    if k == 1:
        return aten.transpose.int(flip(a, [d1]), d0, d1)
    if k == 2:
        return flip(a, [d0, d1])
    if k == 3:
        return flip(aten.transpose.int(a, d0, d1), [d1])
    return prims.clone(a)


@register_decomposition(aten.trace.default)
def trace(a):
    return aten.sum.default(prims.diagonal(a, 0, 0, 1))


@register_decomposition(aten.block_diag.default)
def block_diag(tensors):
    mats = [
        t if t.dim() == 2 else prims.reshape(t, [1, t.numel()] if t.dim() == 1 else [1, 1])
        for t in tensors
    ]
    dtype = result_type(*mats)
    cols = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        right = cols - left - m.shape[1]
        rows.append(prims.pad(convert(m, dtype), 0, [0, left], [0, right], [0, 0]))
        left += m.shape[1]
    return prims.cat(rows, 0)


@register_decomposition(aten.pixel_shuffle.default)
def pixel_shuffle(a, upscale_factor):
    r = upscale_factor
    *batch, c, h, w = a.shape
    nb = len(batch)
    x = prims.reshape(a, [*batch, c // (r * r), r, r, h, w])
    order = [*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2]
    x = prims.permute(x, order)
    return prims.reshape(x, [*batch, c // (r * r), h * r, w * r])


@register_decomposition(aten.pixel_unshuffle.default)
def pixel_unshuffle(a, downscale_factor):
    r = downscale_factor
    *batch, c, h, w = a.shape
    nb = len(batch)
    x = prims.reshape(a, [*batch, c, h // r, r, w // r, r])
    order = [*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3]
    x = prims.permute(x, order)
    return prims.reshape(x, [*batch, c * r * r, h // r, w // r])


@register_decomposition(aten.channel_shuffle.default, aten.native_channel_shuffle.default)
def channel_shuffle(a, groups):
    n, c, *rest = a.shape
    x = prims.reshape(a, [n, groups, c // groups, *rest])
    x = prims.permute(x, [0, 2, 1, *range(3, x.dim())])
    return prims.reshape(x, list(a.shape))


@register_decomposition(aten.diag_embed.default)
def diag_embed(a, offset=0, dim1=-2, dim2=-1):
    out_ndim = a.dim() + 1
    d1, d2 = canonical_dim(dim1, out_ndim), canonical_dim(dim2, out_ndim)
    n = a.shape[-1] + abs(offset) if a.dim() else abs(offset) + 1
    # Zero matrix, then write `a` on its diagonal through as_strided_scatter.
    batch = list(a.shape[:-1])
    shape = batch[:]
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    zeros = prims.full(shape, 0, dtype=a.dtype, device=a.device)
    view = prims.diagonal(zeros, offset, d1, d2)
    return prims.as_strided_scatter(
        zeros, a, list(view.shape), list(view.stride()), view.storage_offset()
    )
