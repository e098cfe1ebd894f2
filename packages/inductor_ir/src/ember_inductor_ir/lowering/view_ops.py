"""Lowerings of the aliasing view prims: each is an index map over its input, never a copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ember_primops import get_prim, is_prim

from ..indexing import product
from ..nodes import TensorBox
from ..views import (
    View,
    as_strided,
    broadcast_in_dim,
    expand_dims,
    permute,
    reshape,
    slice_view,
    squeeze,
    storage_view,
    unfold,
    unwrap,
)
from ._helpers import pointwise
from .registry import prim_name, register_lowering

#: View prims that map the elements of their input one to one: an in-place kernel may write
#: through them (scatter_ops, add_folds)
INJECTIVE_VIEWS = frozenset(
    {
        "collapse",
        "collapse_view",
        "expand_dims",
        "permute",
        "reshape",
        "split_dim",
        "squeeze",
        "view_of",
    }
)
#: Prims whose lowering is a whole-tensor index map (a View) of their input: a reader of
#: such a view reads every element of the input again, so it counts as a reader of the
#: input when deciding whether to realize it. (``slice`` is not here: slices of one value
#: usually read disjoint parts, so recomputing each part duplicates no work. ``unfold``
#: is: pooling windows cover their input.)
PASS_THROUGH_VIEWS = INJECTIVE_VIEWS | {"broadcast_in_dim", "unfold"}


def reader_count(node: torch.fx.Node) -> int:
    """How many nodes read ``node``'s value, looking through whole-tensor views of it. Slices
    that do not overlap (a value split in halves) read each element once between them: they
    count as their most-read slice."""
    slices = _disjoint_slices(node)
    if slices:
        return max(max(reader_count(s), 1) for s in slices)
    count = 0
    for user in node.users:
        if isinstance(user.target, torch._ops.OpOverload) and (
            prim_name(user.target) in PASS_THROUGH_VIEWS
        ):
            count += max(reader_count(user), 1)
        else:
            count += 1
    return count


_ELEMENTWISE = frozenset({"unary", "binary", "comparison", "ternary", "conversion"})


def _repeat_ratio(node: torch.fx.Node, user: torch.fx.Node) -> int:
    """How many of ``user``'s elements each of ``node``'s stands for (1 where symbolic)."""
    small, wide = node.meta.get("val"), user.meta.get("val")
    sizes = [*getattr(small, "shape", ()), *getattr(wide, "shape", ())]
    if small is None or wide is None or not all(isinstance(s, int) for s in sizes):
        return 1
    return wide.numel() // max(small.numel(), 1)


def broadcast_factor(node: torch.fx.Node, through_broadcasts: bool = False) -> int:
    """How many times the largest broadcast among ``node``'s readers (looking through views
    that map elements one to one) repeats each of its elements; 1 when none does, or where
    sizes are symbolic. ``through_broadcasts``: a ``broadcast_in_dim`` reader's own readers
    count too (a statistic unsqueezed to [1, C, 1, 1], then broadcast by a multiply)."""
    factor = 1
    for user in node.users:
        if not isinstance(user.target, torch._ops.OpOverload):
            continue
        name = prim_name(user.target)
        if name in INJECTIVE_VIEWS:
            factor = max(factor, broadcast_factor(user, through_broadcasts))
        elif through_broadcasts and name == "broadcast_in_dim":
            ratio = _repeat_ratio(node, user)
            factor = max(factor, ratio * broadcast_factor(user, through_broadcasts))
        elif name == "broadcast_in_dim" or (
            is_prim(user.target) and get_prim(user.target).category in _ELEMENTWISE
        ):
            # an element-wise prim broadcasts its operands to the result's shape
            factor = max(factor, _repeat_ratio(node, user))
    return factor


def _disjoint_slices(node: torch.fx.Node) -> list[torch.fx.Node]:
    """``node``'s users when they are two or more unit-step slices of it, no two of which
    share an element (static bounds only); else []."""
    users = list(node.users)
    boxes = []
    for user in users:
        if not (
            isinstance(user.target, torch._ops.OpOverload) and prim_name(user.target) == "slice"
        ):
            return []
        start, limit = user.args[1], user.args[2]
        steps = user.args[3] if len(user.args) > 3 else user.kwargs.get("strides")
        if any(not isinstance(v, int) for v in (*start, *limit)):
            return []
        if steps is not None and any(step != 1 for step in steps):
            return []
        boxes.append(list(zip(start, limit, strict=True)))
    if len(boxes) < 2:
        return []
    for k, a in enumerate(boxes):
        for b in boxes[k + 1 :]:
            if not any(la <= sb or lb <= sa for (sa, la), (sb, lb) in zip(a, b, strict=True)):
                return []
    return users


@register_lowering("broadcast_in_dim")
def lower_broadcast_in_dim(
    ctx: Any, a: TensorBox, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> TensorBox:
    return TensorBox(broadcast_in_dim(a, shape, broadcast_dimensions))


@register_lowering("squeeze")
def lower_squeeze(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
    return TensorBox(squeeze(a, dims))


@register_lowering("expand_dims")
def lower_expand_dims(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
    return TensorBox(expand_dims(a, dims))


@register_lowering("permute")
def lower_permute(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
    return TensorBox(permute(a, [d % max(len(dims), 1) for d in dims]))


@register_lowering("slice")
def lower_slice(
    ctx: Any,
    a: TensorBox,
    start_indices: Sequence[int],
    limit_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> TensorBox:
    steps = list(strides) if strides is not None else [1] * len(start_indices)
    return TensorBox(slice_view(a, start_indices, limit_indices, steps))


@register_lowering("unfold")
def lower_unfold(ctx: Any, a: TensorBox, dim: int, size: int, step: int) -> TensorBox:
    # An index map: a pooling window reads its input straight from the producer's buffer
    # (in whatever layout that has) instead of a library view that pins the layout. An
    # input computed inline (batch norm + relu before a max-pool) stays inline for one
    # reader of the windows; several (max and argmax in training) read it from a buffer.
    if reader_count(ctx.current_node) > 1:
        ctx.realize(a)
    return TensorBox(unfold(a, dim, size, step))


@register_lowering("as_strided")
def lower_as_strided(
    ctx: Any, a: TensorBox, size: Sequence[int], stride: Sequence[int], storage_offset: int
) -> TensorBox:
    ctx.realize(a)
    base = a
    while isinstance(inner := unwrap(base), View) and inner.layout_map is not None:
        base = inner.base  # strided views (stft's squeeze/unsqueeze) over a computed value:
    ctx.realize(base)  # its buffer is the storage they view
    if storage_view(a) is None:
        ctx.realize_copy(a)  # pragma: no cover - a view strides cannot express
    found = storage_view(a)
    if found is not None and hasattr(found[0].layout, "freeze"):
        found[0].layout.freeze()  # as_strided addresses the storage: strides are now fixed
    return TensorBox(as_strided(a, size, stride, storage_offset))


@register_lowering("split_dim")
def lower_split_dim(ctx: Any, a: TensorBox, dim: int, outer_length: int) -> TensorBox:
    size = list(a.get_size())
    dim = dim % len(size)
    inner = size[dim] // outer_length
    return TensorBox(reshape(a, [*size[:dim], outer_length, inner, *size[dim + 1 :]]))


def _collapse(ctx: Any, a: TensorBox, start: int, end: int) -> TensorBox:
    size = list(a.get_size())
    return TensorBox(reshape(a, [*size[:start], product(size[start:end]), *size[end:]]))


register_lowering("collapse_view")(_collapse)
register_lowering("collapse")(_collapse)


@register_lowering("view_element_type")
def lower_view_element_type(ctx: Any, a: TensorBox, dtype: torch.dtype) -> TensorBox:
    if a.get_dtype().itemsize != dtype.itemsize:
        # Changes the shape; only the library call knows how.
        return ctx.extern(ctx.current_node.target, [a, dtype], fallback=True)
    return pointwise([a], lambda ops, x: ops.to_dtype_bitcast(x, dtype), dtype)
