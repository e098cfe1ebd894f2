"""View prims: results alias their input (``Tensor(a) a -> Tensor(a)``).

Each prim is one function used both as meta and as reference: it validates its arguments and
returns ``as_strided`` (or an aten view) of the input, which works the same for real, meta and
fake tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from ._checks import canonical_dim, canonical_dims, check_dtype, check_tensor
from ._registry import define_prim, fail


def _restride(a: torch.Tensor, shape: Sequence[int], strides: Sequence[int]) -> torch.Tensor:
    return a.as_strided(list(shape), list(strides), a.storage_offset())


def _define_view(schema: str, fn: Callable, notes: str, eager: Callable | None = None) -> None:
    define_prim(
        schema, "view", fn, fn, tags=("views",), notes=notes, eager=eager, check_reference=False
    )


def broadcast_in_dim(a, shape, broadcast_dimensions):
    p = "broadcast_in_dim"
    check_tensor(p, a)
    dims = list(broadcast_dimensions)
    if len(dims) != a.ndim:
        fail(p, f"broadcast_dimensions {dims} must name one output dim per input dim ({a.ndim})")
    if any(d < 0 or d >= len(shape) for d in dims) or sorted(set(dims)) != dims:
        fail(p, f"broadcast_dimensions {dims} must be increasing dims of the {len(shape)}-d result")
    strides = [0] * len(shape)
    for i, d in enumerate(dims):
        if a.shape[i] == shape[d]:
            strides[d] = a.stride(i)
        elif a.shape[i] != 1:
            fail(p, f"input dim {i} (size {a.shape[i]}) cannot broadcast to size {shape[d]}")
    return _restride(a, shape, strides)


_define_view(
    "broadcast_in_dim(Tensor(a) a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor(a)",
    broadcast_in_dim,
    "input dim i becomes result dim broadcast_dimensions[i]; others are broadcast (stride 0)",
)


def squeeze(a, dims):
    p = "squeeze"
    check_tensor(p, a)
    dims = canonical_dims(p, dims, a.ndim) if a.ndim else []
    for d in dims:
        if a.shape[d] != 1:
            fail(p, f"dim {d} has size {a.shape[d]}, only size-1 dims can be squeezed")
    keep = [d for d in range(a.ndim) if d not in dims]
    return _restride(a, [a.shape[d] for d in keep], [a.stride(d) for d in keep])


_define_view(
    "squeeze(Tensor(a) a, int[] dims) -> Tensor(a)",
    squeeze,
    "removes the listed size-1 dims",
    eager=lambda a, dims: torch.squeeze(a, tuple(dims)) if dims else a,
)


def expand_dims(a, dims):
    p = "expand_dims"
    check_tensor(p, a)
    ndim = a.ndim + len(dims)
    new = set(canonical_dims(p, dims, ndim))
    shape, strides, src = [], [], 0
    for d in range(ndim):
        if d in new:
            shape.append(1)
            strides.append(0)
        else:
            shape.append(a.shape[src])
            strides.append(a.stride(src))
            src += 1
    # A size-1 dim's stride is free; use the contiguous-looking value like unsqueeze does.
    for d in range(ndim - 1, -1, -1):
        if d in new:
            strides[d] = strides[d + 1] * shape[d + 1] if d + 1 < ndim else 1
    return _restride(a, shape, strides)


def _expand_dims_eager(a, dims):
    for d in sorted(x % (a.ndim + len(dims)) for x in dims):
        a = a.unsqueeze(d)
    return a


_define_view(
    "expand_dims(Tensor(a) a, int[] dims) -> Tensor(a)",
    expand_dims,
    "inserts size-1 dims at the listed result positions",
    eager=_expand_dims_eager,
)


def permute(a, dims):
    p = "permute"
    check_tensor(p, a)
    if len(dims) != a.ndim:
        fail(p, f"dims {list(dims)} must have one entry per dim ({a.ndim})")
    dims = canonical_dims(p, dims, a.ndim)
    return _restride(a, [a.shape[d] for d in dims], [a.stride(d) for d in dims])


_define_view(
    "permute(Tensor(a) a, int[] dims) -> Tensor(a)",
    permute,
    "result dim i is input dim dims[i]",
    eager=lambda a, dims: a.permute(dims),
)


def slice_(a, start_indices, limit_indices, strides=None):
    p = "slice"
    check_tensor(p, a)
    steps = list(strides) if strides is not None else [1] * a.ndim
    if not len(start_indices) == len(limit_indices) == len(steps) == a.ndim:
        fail(p, f"start/limit/strides need one entry per dim ({a.ndim})")
    shape, new_strides, offset = [], [], a.storage_offset()
    for d, (lo, hi, st) in enumerate(zip(start_indices, limit_indices, steps, strict=False)):
        if not 0 <= lo <= hi <= a.shape[d] or st <= 0:
            fail(p, f"dim {d}: need 0 <= start {lo} <= limit {hi} <= size {a.shape[d]}, step > 0")
        shape.append((hi - lo + st - 1) // st)
        new_strides.append(a.stride(d) * st)
        offset += lo * a.stride(d)
    return a.as_strided(shape, new_strides, offset)


def _slice_eager(a, start_indices, limit_indices, strides=None):
    steps = strides or [1] * a.ndim
    return a[
        tuple(
            slice(lo, hi, st)
            for lo, hi, st in zip(start_indices, limit_indices, steps, strict=False)
        )
    ]


_define_view(
    "slice(Tensor(a) a, SymInt[] start_indices, SymInt[] limit_indices, SymInt[]? strides=None)"
    " -> Tensor(a)",
    slice_,
    "a[start:limit:stride] in every dim (in-bounds, positive steps)",
    eager=_slice_eager,
)


def as_strided(a, size, stride, storage_offset):
    p = "as_strided"
    check_tensor(p, a)
    if len(size) != len(stride):
        fail(p, f"size {list(size)} and stride {list(stride)} differ in length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or storage_offset < 0:
        fail(p, "size, stride and storage_offset must be non-negative")
    if all(s > 0 for s in size):
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride, strict=False))
        capacity = a.untyped_storage().nbytes() // a.element_size()
        if last >= capacity:
            fail(p, f"element {last} is outside the storage of {capacity} elements")
    return a.as_strided(list(size), list(stride), storage_offset)


_define_view(
    "as_strided(Tensor(a) a, SymInt[] size, SymInt[] stride, SymInt storage_offset) -> Tensor(a)",
    as_strided,
    "raw view of a's storage (bounds-checked)",
    eager=lambda a, size, stride, off: torch.as_strided(a, size, stride, off),
)


def split_dim(a, dim, outer_length):
    p = "split_dim"
    check_tensor(p, a)
    dim = canonical_dim(p, dim, a.ndim)
    if outer_length <= 0 or a.shape[dim] % outer_length:
        fail(p, f"outer_length {outer_length} does not divide dim {dim} of size {a.shape[dim]}")
    inner = a.shape[dim] // outer_length
    shape = [*a.shape[:dim], outer_length, inner, *a.shape[dim + 1 :]]
    strides = [*a.stride()[:dim], a.stride(dim) * inner, a.stride(dim), *a.stride()[dim + 1 :]]
    return _restride(a, shape, strides)


_define_view(
    "split_dim(Tensor(a) a, int dim, SymInt outer_length) -> Tensor(a)",
    split_dim,
    "dim -> (outer_length, size // outer_length)",
    eager=lambda a, dim, outer: a.unflatten(dim, (outer, -1)),
)


def collapsed_strides(a: torch.Tensor, start: int, end: int) -> int | None:
    """The stride of dims [start, end) merged into one, or None when no view exists."""
    dims = [d for d in range(start, end) if a.shape[d] != 1]
    if any(a.shape[d] == 0 for d in range(start, end)):
        return 1
    if not dims:
        return 1
    for outer, inner in itertools.pairwise(dims):
        if a.stride(outer) != a.stride(inner) * a.shape[inner]:
            return None
    return a.stride(dims[-1])


def check_collapse(p: str, a: torch.Tensor, start: int, end: int) -> None:
    check_tensor(p, a)
    if not 0 <= start < end <= max(a.ndim, 1):
        fail(p, f"need 0 <= start {start} < end {end} <= ndim {a.ndim} (end is exclusive)")


def collapse_view(a, start, end):
    p = "collapse_view"
    check_collapse(p, a, start, end)
    if a.ndim == 0:
        return _restride(a, [1], [1])
    stride = collapsed_strides(a, start, end)
    if stride is None:
        fail(
            p,
            f"dims [{start}, {end}) of strides {list(a.stride())} cannot be merged in a view "
            "(use collapse, which copies)",
        )
    length = 1
    for d in range(start, end):
        length *= a.shape[d]
    shape = [*a.shape[:start], length, *a.shape[end:]]
    strides = [*a.stride()[:start], stride, *a.stride()[end:]]
    return _restride(a, shape, strides)


_define_view(
    "collapse_view(Tensor(a) a, int start, int end) -> Tensor(a)",
    collapse_view,
    "merges dims [start, end) (end exclusive); error when no view exists",
    eager=lambda a, start, end: a.flatten(start, end - 1) if a.ndim else a.reshape(1),
)


def view_of(a):
    check_tensor("view_of", a)
    return _restride(a, a.shape, a.stride())


_define_view("view_of(Tensor(a) a) -> Tensor(a)", view_of, "an alias of a", eager=lambda a: a)


def unfold(a, dim, size, step):
    p = "unfold"
    check_tensor(p, a)
    dim = canonical_dim(p, dim, a.ndim)
    length = a.shape[dim] if a.ndim else 1
    if size < 0 or size > length or step <= 0:
        fail(p, f"need 0 <= size {size} <= {length} and step {step} > 0")
    return a.unfold(dim, size, step)


_define_view(
    "unfold(Tensor(a) a, int dim, int size, int step) -> Tensor(a)",
    unfold,
    "sliding windows along dim as a new last dim",
    eager=lambda a, dim, size, step: a.unfold(dim, size, step),
)


def diagonal(a, offset, dim1, dim2):
    p = "diagonal"
    check_tensor(p, a)
    if a.ndim < 2:
        fail(p, f"needs at least 2 dims, got {a.ndim}")
    d1, d2 = canonical_dims(p, [dim1, dim2], a.ndim)
    return torch.diagonal(a, offset, d1, d2)


_define_view(
    "diagonal(Tensor(a) a, int offset, int dim1, int dim2) -> Tensor(a)",
    diagonal,
    "the diagonal of dims (dim1, dim2) as a new last dim",
    eager=lambda a, offset, d1, d2: torch.diagonal(a, offset, d1, d2),
)


def _complex_part(name: str, fn: Callable) -> Callable:
    def part(a):
        check_tensor(name, a)
        check_dtype(name, a, "complex")
        return fn(a)

    part.__name__ = name
    return part


for _name, _fn, _note in (
    ("real", torch.real, "the real part of a complex tensor (a view)"),
    ("imag", torch.imag, "the imaginary part of a complex tensor (a view)"),
    ("view_as_real", torch.view_as_real, "complex (...) -> real (..., 2)"),
):
    _define_view(f"{_name}(Tensor(a) a) -> Tensor(a)", _complex_part(_name, _fn), _note, _fn)


def view_as_complex(a):
    p = "view_as_complex"
    check_tensor(p, a)
    check_dtype(p, a, "float32_64")
    if a.ndim == 0 or a.shape[-1] != 2 or a.stride(-1) != 1:
        fail(p, "needs a last dim of size 2 and stride 1")
    if a.storage_offset() % 2 or any(s % 2 for s in a.stride()[:-1]):
        fail(p, "needs even strides and storage offset")
    return torch.view_as_complex(a)


_define_view(
    "view_as_complex(Tensor(a) a) -> Tensor(a)",
    view_as_complex,
    "real (..., 2) -> complex (...)",
    eager=torch.view_as_complex,
)
