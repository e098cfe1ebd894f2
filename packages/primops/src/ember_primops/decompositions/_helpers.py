"""Shape and dtype helpers shared by the decomposition families."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions.type_promotion import Number, as_tensor, convert

aten = torch.ops.aten


def canonical_dim(dim: int, ndim: int) -> int:
    """``dim`` wrapped into ``[0, ndim)``; a 0-dim tensor accepts dims -1 and 0."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
            f"but got {dim})"
        )
    return dim % rank if ndim > 0 else 0


def reduction_dims(dims: int | Sequence[int] | None, ndim: int) -> list[int]:
    """Canonical, sorted, unique reduction dims; None or [] means every dim."""
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(ndim))
    out = sorted({canonical_dim(d, ndim) for d in dims})
    return [d for d in out if d < ndim]


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return strides[::-1]


def broadcast_shapes(*shapes: Sequence[int]) -> list[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size == out[i] or size == 1:
                continue
            if out[i] != 1:
                raise RuntimeError(
                    f"shapes {[list(s) for s in shapes]} are not broadcastable at dim {i}"
                )
            out[i] = size
    return out


def expand_to(a: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """A broadcast view of ``a`` with ``shape`` (numpy rules)."""
    shape = list(shape)
    if list(a.shape) == shape:
        return a
    offset = len(shape) - a.dim()
    if offset < 0:
        raise RuntimeError(f"cannot expand shape {list(a.shape)} to {shape}")
    return prims.broadcast_in_dim(a, shape, list(range(offset, len(shape))))


def keep_dims(result: torch.Tensor, dims: Sequence[int], keepdim: bool) -> torch.Tensor:
    """Re-insert reduced ``dims`` as size-1 dims when ``keepdim``."""
    if not keepdim or not dims:
        return result
    return prims.expand_dims(result, list(dims))


def scalar(value: Number, like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A 0-dim tensor holding ``value`` with ``like``'s device (and ``dtype`` or its dtype)."""
    return prims.scalar_tensor(value, dtype=dtype or like.dtype, device=like.device)


def full_like_shape(
    shape: Sequence[int], value: Number, like: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    return prims.full(list(shape), value, dtype=dtype or like.dtype, device=like.device)


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def tensor_or_number(x: torch.Tensor | Number, dtype: torch.dtype, like: torch.Tensor):
    return (
        as_tensor(x, dtype, like.device) if not isinstance(x, torch.Tensor) else convert(x, dtype)
    )


def where(pred: torch.Tensor, a: torch.Tensor | Number, b: torch.Tensor | Number) -> torch.Tensor:
    """prims.where with numbers wrapped to the dtype of the tensor operand."""
    dtype = a.dtype if isinstance(a, torch.Tensor) else b.dtype  # type: ignore[union-attr]
    return prims.where(pred, tensor_or_number(a, dtype, pred), tensor_or_number(b, dtype, pred))
