"""View ops: results alias their input, built from the aliasing prims only."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, numel
from ember_primops.decompositions._registry import register_decomposition

aten = torch.ops.aten


def infer_size(shape: Sequence[int], total: int) -> list[int]:
    """``shape`` with a single -1 replaced so that it holds ``total`` elements."""
    shape = list(shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = numel(s for s in shape if s != -1)
    if unknown:
        if known == 0 or total % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {total}")
        shape[unknown[0]] = total // known
    elif known != total:
        raise RuntimeError(f"shape '{shape}' is invalid for input of size {total}")
    return shape


def _squeeze_all(a: torch.Tensor) -> torch.Tensor:
    ones = [i for i, s in enumerate(a.shape) if s == 1]
    return prims.squeeze(a, ones) if ones else a


@register_decomposition(aten.view.default, aten._unsafe_view.default)
def view(a: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    shape = infer_size(size, a.numel())
    if list(a.shape) == shape:
        return alias(a)
    if a.numel() == 0:
        return prims.as_strided(a, shape, [1] * len(shape), a.storage_offset())
    # Drop size-1 dims, then match input and output dims group by group with collapse/split,
    # and re-insert the output's size-1 dims at the end.
    x = _squeeze_all(a)
    target = [s for s in shape if s != 1]
    for idx, length in enumerate(target):
        accum = x.shape[idx]
        end = idx + 1
        while accum % length:
            accum *= x.shape[end]
            end += 1
        if end - idx > 1:
            x = prims.collapse_view(x, idx, end)
        if accum != length:
            x = prims.split_dim(x, idx, length)
    ones = [i for i, s in enumerate(shape) if s == 1]
    return prims.expand_dims(x, ones) if ones else x


@register_decomposition(aten.alias.default, aten.detach.default)
def alias(a: torch.Tensor) -> torch.Tensor:
    return prims.view_of(a)


@register_decomposition(aten.lift_fresh.default)
def lift_fresh(a: torch.Tensor) -> torch.Tensor:
    return a


@register_decomposition(aten.unsqueeze.default)
def unsqueeze(a: torch.Tensor, dim: int) -> torch.Tensor:
    return prims.expand_dims(a, [canonical_dim(dim, a.dim() + 1)])


@register_decomposition(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(a: torch.Tensor, dim: int | Sequence[int] | None = None) -> torch.Tensor:
    if dim is None:
        dims = range(a.dim())
    else:
        dims = [canonical_dim(d, a.dim()) for d in ([dim] if isinstance(dim, int) else dim)]
    ones = sorted({d for d in dims if a.dim() > 0 and a.shape[d] == 1})
    return prims.squeeze(a, ones) if ones else alias(a)


@register_decomposition(aten.expand.default)
def expand(a: torch.Tensor, size: Sequence[int], *, implicit: bool = False) -> torch.Tensor:
    size = list(size)
    if len(size) < a.dim():
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({a.dim()})"
        )
    offset = len(size) - a.dim()
    shape = [a.shape[i - offset] if s == -1 and i >= offset else s for i, s in enumerate(size)]
    for i in range(a.dim()):
        if a.shape[i] != 1 and a.shape[i] != shape[i + offset]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i + offset]}) must match the existing "
                f"size ({a.shape[i]}) at non-singleton dimension {i + offset}"
            )
    return prims.broadcast_in_dim(a, shape, list(range(offset, len(shape))))


@register_decomposition(aten.permute.default)
def permute(a: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    return prims.permute(a, [canonical_dim(d, a.dim()) for d in dims])


@register_decomposition(aten.transpose.int)
def transpose(a: torch.Tensor, dim0: int, dim1: int) -> torch.Tensor:
    if a.dim() == 0:
        return alias(a)
    order = list(range(a.dim()))
    d0, d1 = canonical_dim(dim0, a.dim()), canonical_dim(dim1, a.dim())
    order[d0], order[d1] = order[d1], order[d0]
    return prims.permute(a, order)


@register_decomposition(aten.t.default)
def t(a: torch.Tensor) -> torch.Tensor:
    if a.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.dim()}D")
    return transpose(a, 0, 1) if a.dim() == 2 else alias(a)


@register_decomposition(aten.slice.Tensor)
def slice_(
    a: torch.Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> torch.Tensor:
    dim = canonical_dim(dim, a.dim())
    length = a.shape[dim]
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start = 0 if start is None else start
    end = length if end is None else end
    start = min(max(start + length if start < 0 else start, 0), length)
    end = min(max(end + length if end < 0 else end, start), length)
    lo = [0] * a.dim()
    hi = list(a.shape)
    strides = [1] * a.dim()
    lo[dim], hi[dim], strides[dim] = start, end, step
    return prims.slice(a, lo, hi, strides)


@register_decomposition(aten.select.int)
def select(a: torch.Tensor, dim: int, index: int) -> torch.Tensor:
    dim = canonical_dim(dim, a.dim())
    length = a.shape[dim]
    if not -length <= index < length:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(a.shape)} "
            f"at dimension {dim}"
        )
    index = index % length
    return prims.squeeze(slice_(a, dim, index, index + 1), [dim])


@register_decomposition(aten.narrow.default)
def narrow(a: torch.Tensor, dim: int, start: int, length: int) -> torch.Tensor:
    dim = canonical_dim(dim, a.dim())
    if start < 0:
        start += a.shape[dim]
    return slice_(a, dim, start, start + length)


@register_decomposition(aten.as_strided.default)
def as_strided(a, size, stride, storage_offset=None):
    offset = a.storage_offset() if storage_offset is None else storage_offset
    return prims.as_strided(a, list(size), list(stride), offset)


@register_decomposition(aten.diagonal.default)
def diagonal(a: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> torch.Tensor:
    if canonical_dim(dim1, a.dim()) == canonical_dim(dim2, a.dim()):
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return prims.diagonal(a, offset, dim1, dim2)


@register_decomposition(aten.unfold.default)
def unfold(a: torch.Tensor, dimension: int, size: int, step: int) -> torch.Tensor:
    length = a.shape[canonical_dim(dimension, a.dim())] if a.dim() else 1
    if size > length:
        raise RuntimeError(
            f"maximum size for tensor at dimension {dimension} is {length} but size is {size}"
        )
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return prims.unfold(a, dimension, size, step)


@register_decomposition(aten.split.Tensor, aten.unsafe_split.Tensor)
def split(a: torch.Tensor, split_size: int, dim: int = 0) -> list[torch.Tensor]:
    dim = canonical_dim(dim, a.dim())
    length = a.shape[dim]
    if split_size == 0 and length == 0:
        return [alias(a)]
    chunks = max((length + split_size - 1) // split_size, 1)
    sizes = [split_size] * (chunks - 1) + [length - split_size * (chunks - 1)]
    return split_with_sizes(a, sizes, dim)


@register_decomposition(aten.split_with_sizes.default, aten.unsafe_split_with_sizes.default)
def split_with_sizes(a: torch.Tensor, split_sizes: Sequence[int], dim: int = 0):
    dim = canonical_dim(dim, a.dim())
    if sum(split_sizes) != a.shape[dim]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {a.shape[dim]} "
            f"(input tensor's size at dimension {dim}), but got split_sizes={list(split_sizes)}"
        )
    out, start = [], 0
    for size in split_sizes:
        out.append(slice_(a, dim, start, start + size))
        start += size
    return out


@register_decomposition(aten.unbind.int)
def unbind(a: torch.Tensor, dim: int = 0) -> list[torch.Tensor]:
    dim = canonical_dim(dim, a.dim())
    return [select(a, dim, i) for i in range(a.shape[dim])]


def _register_copy_variant(copy_name: str, view_name: str, overloads: Sequence[str]) -> None:
    packet = getattr(aten, copy_name)
    view_packet = getattr(aten, view_name)

    for overload in overloads:
        if overload in packet.overloads():

            def bound(*args, _o=overload, **kwargs):
                out = getattr(view_packet, _o)(*args, **kwargs)
                if isinstance(out, (list, tuple)):
                    return [prims.clone(o) for o in out]
                return prims.clone(out)

            bound.__qualname__ = f"decompose_{copy_name}_{overload}"
            register_decomposition(getattr(packet, overload))(bound)


for _copy, _view, _overloads in [
    ("view_copy", "view", ("default",)),
    ("expand_copy", "expand", ("default",)),
    ("permute_copy", "permute", ("default",)),
    ("alias_copy", "alias", ("default",)),
    ("detach_copy", "detach", ("default",)),
    ("as_strided_copy", "as_strided", ("default",)),
    ("diagonal_copy", "diagonal", ("default",)),
    ("squeeze_copy", "squeeze", ("default", "dim", "dims")),
    ("unsqueeze_copy", "unsqueeze", ("default",)),
    ("t_copy", "t", ("default",)),
    ("transpose_copy", "transpose", ("int",)),
    ("unbind_copy", "unbind", ("int",)),
    ("split_copy", "split", ("Tensor",)),
    ("split_with_sizes_copy", "split_with_sizes", ("default",)),
    ("narrow_copy", "narrow", ("default",)),
    ("unfold_copy", "unfold", ("default",)),
    ("slice_copy", "slice", ("Tensor",)),
    ("select_copy", "select", ("int",)),
]:
    _register_copy_variant(_copy, _view, _overloads)
