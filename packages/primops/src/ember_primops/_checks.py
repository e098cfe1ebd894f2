"""Shared argument checks and layout rules used by the meta functions.

Every check raises ``PrimInputError``/``PrimDtypeError`` with the prim's name in the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._registry import fail

FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
COMPLEX = frozenset({torch.complex64, torch.complex128})
SIGNED_INTEGER = frozenset({torch.int8, torch.int16, torch.int32, torch.int64})
INTEGER = SIGNED_INTEGER | frozenset({torch.uint8, torch.uint16, torch.uint32, torch.uint64})
BOOL = frozenset({torch.bool})

# Named dtype classes used in the prim tables ("what may this prim take").
DTYPE_CLASSES: dict[str, frozenset[torch.dtype]] = {
    "float": FLOATING,
    "float_complex": FLOATING | COMPLEX,
    "real": FLOATING | INTEGER,
    "real_bool": FLOATING | INTEGER | BOOL,
    "signed_real": FLOATING | SIGNED_INTEGER,
    "number": FLOATING | COMPLEX | INTEGER,
    "signed_number": FLOATING | COMPLEX | SIGNED_INTEGER,
    "any": FLOATING | COMPLEX | INTEGER | BOOL,
    "integer": INTEGER,
    "integer_bool": INTEGER | BOOL,
    "complex": COMPLEX,
    "float32_64": frozenset({torch.float32, torch.float64}),
}


def check_tensor(prim: str, x: object, what: str = "argument") -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        fail(
            prim,
            f"{what} must be a Tensor, got {type(x).__name__} "
            "(wrap Python numbers with ember_prims.scalar_tensor)",
            dtype=True,
        )
    return x


def check_dtype(prim: str, x: torch.Tensor, dtype_class: str, what: str = "input") -> None:
    allowed = DTYPE_CLASSES[dtype_class]
    if x.dtype not in allowed:
        fail(
            prim,
            f"{what} has dtype {x.dtype}, but this prim takes {dtype_class} dtypes",
            dtype=True,
        )


def check_same_dtype(prim: str, tensors: Sequence[torch.Tensor]) -> torch.dtype:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        names = ", ".join(str(t.dtype) for t in tensors)
        fail(
            prim,
            f"tensor arguments must all have the same dtype, got {names} "
            "(type promotion belongs to the decompositions: insert convert_element_type)",
            dtype=True,
        )
    return tensors[0].dtype


def broadcast_shapes(prim: str, shapes: Sequence[Sequence[int]]) -> list[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape):
            j = ndim - len(shape) + i
            if out[j] == 1:
                out[j] = size
            elif size != 1 and size != out[j]:
                fail(prim, f"shapes {[list(s) for s in shapes]} are not broadcastable")
    return out


def common_device(prim: str, tensors: Sequence[torch.Tensor]) -> torch.device:
    """The device of the result: 0-dim CPU tensors may mix with tensors on another device."""
    devices = {t.device for t in tensors if not (t.ndim == 0 and t.device.type == "cpu")}
    if len(devices) > 1:
        fail(prim, f"tensors are on different devices: {sorted(str(d) for d in devices)}")
    return devices.pop() if devices else tensors[0].device


def canonical_dim(prim: str, dim: int, ndim: int) -> int:
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        fail(prim, f"dim {dim} is out of range for a tensor with {ndim} dims")
    return dim % bound


def canonical_dims(prim: str, dims: Sequence[int], ndim: int) -> list[int]:
    out = [canonical_dim(prim, d, ndim) for d in dims]
    if len(set(out)) != len(out):
        fail(prim, f"dims {list(dims)} repeat a dimension")
    return out


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    running = 1
    for i in range(len(shape) - 1, 0, -1):
        strides[i] = running
        running *= _at_least_one(shape[i])
    if shape:
        strides[0] = running
    return strides


def _at_least_one(size: Any) -> Any:
    """``max(size, 1)``; for a size only the run knows (unbacked) the symbolic max."""
    if isinstance(size, torch.SymInt) and not size.node.has_hint():
        return torch.sym_max(size, 1)
    return max(size, 1)


def _guard_or(cond: Any, fallback: bool) -> bool:
    """A condition on sizes, decided (guarded) where the sizes have values; on a size only the
    run knows (an unbacked one: `t.item()`, nonzero's length) the safe ``fallback``."""
    if isinstance(cond, torch.SymBool):
        return cond.node.guard_or_true() if fallback else cond.node.guard_or_false()
    return bool(cond)


def is_dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the elements fill a contiguous block in some dim order (a
    dim of unknown size counts as more than 1: its stride must fit; any answer is right for
    a size-1 dim)."""
    dims = sorted(
        (d for d in range(t.ndim) if _guard_or(t.shape[d] != 1, True)), key=lambda d: t.stride(d)
    )
    expected = 1
    for d in dims:
        if _guard_or(t.stride(d) != expected, True):
            return False
        expected *= t.shape[d]
    return True


def dense_strides_like(t: torch.Tensor) -> list[int]:
    """Contiguous strides in ``t``'s dim order when ``t`` is dense, else row-major strides."""
    if not is_dense(t) or _guard_or(t.numel() == 0, False):
        return contiguous_strides(t.shape)
    # Outermost first: larger stride first, ties broken by dim index.
    order = sorted(range(t.ndim), key=lambda d: (-t.stride(d), d))
    strides = [0] * t.ndim
    running = 1
    for d in reversed(order):
        strides[d] = running
        running *= t.shape[d]
    return strides


def elementwise_strides(shape: Sequence[int], tensors: Sequence[torch.Tensor]) -> list[int]:
    """Eager's rule, simplified: keep the layout of the full-shape inputs when they agree."""
    full = [t for t in tensors if list(t.shape) == list(shape) and t.ndim > 0]
    # compared, not hashed: symbolic strides (SymInts) have no hash
    layouts = [tuple(dense_strides_like(t)) for t in full]
    if layouts and all(lay == layouts[0] for lay in layouts) and all(is_dense(t) for t in full):
        return list(layouts[0])
    return contiguous_strides(shape)


def preserved_strides(t: torch.Tensor) -> list[int]:
    """The strides of eager's `empty_like(t)` (preserve_format), which clone and dtype or
    device conversion allocate with: `t`'s own strides where `t` is non-overlapping and
    dense; else dense strides in `t`'s stride order, found by a stable insertion sort of the
    dims (innermost first) that leaves zero-stride dims in place and puts, among equal
    strides, the smaller size inside; dims of size 1 add no extent."""
    if _guard_or(t.numel() == 0, False) or is_dense(t):
        return list(t.stride())
    order = list(range(t.ndim - 1, -1, -1))  # innermost first: the last dim, then ...
    for i in range(1, t.ndim):
        at = i
        for before in range(i - 1, -1, -1):
            outer = _outer_than(t, order[before], order[at])
            if outer is None:
                continue
            if not outer:
                break
            order[before], order[at] = order[at], order[before]
            at = before
    strides = [0] * t.ndim
    running = 1
    for d in order:
        strides[d] = running
        if t.shape[d] > 1:
            running *= t.shape[d]
    return strides


def _outer_than(t: torch.Tensor, a: int, b: int) -> bool | None:
    """Whether dim `a` lies outside dim `b` in memory; None where that is undecided (a zero
    stride, or equal strides without a larger size in `a`)."""
    sa, sb = t.stride(a), t.stride(b)
    if sa == 0 or sb == 0:
        return None
    if sa != sb:
        return sa > sb
    return True if t.shape[a] > t.shape[b] else None


def empty_like_layout(
    t: torch.Tensor, *, dtype: torch.dtype | None = None, device: torch.device | None = None
) -> torch.Tensor:
    return torch.empty_strided(
        t.shape,
        preserved_strides(t),
        dtype=dtype or t.dtype,
        device=device or t.device,
    )


def empty_contiguous(
    shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    return torch.empty_strided(list(shape), contiguous_strides(shape), dtype=dtype, device=device)


def check_int_list(prim: str, values: Sequence[int], what: str) -> None:
    for v in values:
        if isinstance(v, torch.SymInt) and not v.node.has_hint():
            # a size read from data (`torch.ones(t.item())`): checked when the graph runs
            torch._check(v >= 0, lambda: f"{prim}: {what} must be non-negative")
        elif v < 0:
            fail(prim, f"{what} must be non-negative, got {list(values)}")
