"""Lowerings of the shape prims (fresh tensors): reshape, rev, cat, pad, clone, scatters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ..indexing import Expr, FloorDiv, ModularIndexing, as_exprs
from ..nodes import Pointwise, TensorBox
from ..views import View, permute, reshape
from ._helpers import pointwise
from .registry import prim_name, register_lowering


@register_lowering("reshape")
def lower_reshape(ctx: Any, a: TensorBox, shape: Sequence[int]) -> TensorBox:
    # A fresh tensor by contract, but the values are an index map of the input.
    return TensorBox(reshape(a, shape))


@register_lowering("view_of")
def lower_view_of(ctx: Any, a: TensorBox) -> TensorBox:
    return TensorBox(permute(a, list(range(len(a.get_size())))))


@register_lowering("rev")
def lower_rev(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
    size = a.get_size()
    flip = {d % max(len(size), 1) for d in dims}

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [size[d] - 1 - i if d in flip else i for d, i in enumerate(index)]

    return TensorBox(View(a, list(size), reindex, None, "rev"))


@register_lowering("roll")
def lower_roll(ctx: Any, a: TensorBox, shifts: Sequence[int], dims: Sequence[int]) -> TensorBox:
    size = a.get_size()
    moved = {d % max(len(size), 1): s for s, d in zip(shifts, dims, strict=True)}
    moved = {d: sympy.Mod(s, size[d]) for d, s in moved.items()}  # in [0, n): index >= 0

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [
            ModularIndexing(i + size[d] - moved[d], 1, size[d]) if d in moved else i
            for d, i in enumerate(index)
        ]

    return TensorBox(View(a, list(size), reindex, None, "roll"))


@register_lowering("clone", "copy_strided")
def lower_clone(ctx: Any, a: TensorBox, *args: Any, **kwargs: Any) -> TensorBox:
    node = ctx.current_node
    if prim_name(node.target) == "copy_strided" and all(u.op == "output" for u in node.users):
        # A value returned with chosen strides (a saved activation kept channels-last, see
        # saved_layouts.py): the value itself when it is, or can still be, stored so; only
        # the graph's output reads it, so no kernel here can write the shared storage.
        return ctx.require_strides(a, args[0] if args else kwargs["stride"])
    # Values only; strides matter at graph outputs and extern inputs, decided there.
    return pointwise([a], lambda ops, x: x, a.get_dtype())


def _in_range(
    ops: Any, index: Expr, low: Expr, high: Expr, dtype: torch.dtype = torch.int64
) -> Any:
    """low <= index < high, as a bool value, compared in ``dtype``."""
    i = ops.index_expr(index, dtype)
    return ops.logical_and(
        ops.ge(i, _index_value(ops, low, dtype)),
        ops.lt(i, _index_value(ops, high, dtype)),
    )


def _index_value(ops: Any, value: Expr, dtype: torch.dtype = torch.int64) -> Any:
    """A bound: a constant, or (symbolic sizes) the expression computed in the kernel."""
    value = sympy.sympify(value)
    if value.free_symbols:
        return ops.index_expr(value, dtype)
    return ops.constant(int(value), dtype)


def _position_dtype(extent: Expr) -> torch.dtype:
    """int32 for positions along a dim of a static extent that int32 holds: a cat's masks
    then cost one instruction an element each, where int64 took two (its recomputed
    concatenations were a third of ESE-VoVNet's memory rate on the H200)."""
    extent = sympy.sympify(extent)
    return torch.int32 if extent.is_Integer and int(extent) < 2**30 else torch.int64


@register_lowering("cat")
def lower_cat(ctx: Any, tensors: Sequence[TensorBox], dim: int) -> TensorBox:
    tensors = [t for t in tensors if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)]
    size = list(tensors[0].get_size())
    dim = dim % len(size)
    if ctx.target.cat_is_extern(len(tensors)):  # a library copy of the realized inputs
        op = ctx.current_node.target
        return ctx.extern(op, [list(tensors), dim], writes_out=ctx.target.writes_out("cat"))
    starts, total = [], sympy.Integer(0)
    for t in tensors:
        starts.append(total)
        total = total + t.get_size()[dim]
    size[dim] = total
    loaders = [t.make_loader() for t in tensors]
    dtype = tensors[0].get_dtype()
    at = _position_dtype(total)

    def inner_fn(ops: Any, index: Sequence[Expr]) -> Any:
        # The last input needs no mask: earlier ranges take precedence through where().
        def shifted(k: int) -> list[Expr]:
            return [i - starts[k] if d == dim else i for d, i in enumerate(index)]

        value = ops.masked(
            _in_range(ops, index[dim], starts[-1], total, at),
            lambda: loaders[-1](ops, shifted(-1)),
            0,
        )
        for k in range(len(tensors) - 2, -1, -1):
            end = starts[k] + tensors[k].get_size()[dim]
            mask = _in_range(ops, index[dim], starts[k], end, at)
            piece = ops.masked(mask, lambda k=k: loaders[k](ops, shifted(k)), 0)
            value = ops.where(mask, piece, value)
        return value

    return TensorBox(Pointwise(tensors[0].get_device(), dtype, inner_fn, size))


@register_lowering("pad")
def lower_pad(
    ctx: Any,
    a: TensorBox,
    value: bool | int | float,
    low: Sequence[int],
    high: Sequence[int],
    interior: Sequence[int],
) -> TensorBox:
    size = a.get_size()
    lows, highs, gaps = as_exprs(low), as_exprs(high), as_exprs(interior)
    out = [
        lo + hi + _spread(ctx, n, g) for n, lo, hi, g in zip(size, lows, highs, gaps, strict=False)
    ]
    loader = a.make_loader()
    dtype = a.get_dtype()
    # A dim padded by nothing (pooling's "pad" that only crops) reads in bounds: no mask,
    # so that the reader's loop stays branch-free (and vectorizes).
    cropped = [
        lo == 0 and g == 0 and (hi <= 0) is sympy.true
        for lo, hi, g in zip(lows, highs, gaps, strict=False)
    ]
    if all(cropped):
        return TensorBox(Pointwise(a.get_device(), dtype, loader, out))

    def inner_fn(ops: Any, index: Sequence[Expr]) -> Any:
        mask = ops.constant(True, torch.bool)
        source: list[Expr] = []
        for i, n, lo, g, crop in zip(index, size, lows, gaps, cropped, strict=False):
            pos = i - lo
            if crop:
                source.append(pos)
                continue
            if g == 0:
                mask = ops.logical_and(mask, _in_range(ops, pos, 0, n))
                source.append(pos)
                continue
            step = g + 1
            mask = ops.logical_and(mask, _in_range(ops, pos, 0, (n - 1) * step + 1))
            on_grid = ops.eq(
                ops.mod(ops.index_expr(pos, torch.int64), ops.constant(int(step), torch.int64)),
                ops.constant(0, torch.int64),
            )
            mask = ops.logical_and(mask, on_grid)
            source.append(FloorDiv(pos, step) if pos.is_nonnegative else _signed_div(pos, step))
        return ops.masked(mask, lambda: loader(ops, source), value)

    return TensorBox(Pointwise(a.get_device(), dtype, inner_fn, out))


def _spread(ctx: Any, n: Expr, gap: Expr) -> Expr:
    """The extent of n elements with `gap` slots between neighbours: n + (n - 1) * gap, or 0
    for an empty dim. Without gaps that is n for every n, so a symbolic size needs no
    decision; with gaps, whether n > 0 is asked of the size's ShapeEnv (a guard)."""
    if gap == 0:
        return n
    if n.is_Integer:
        return n + (n - 1) * gap if int(n) > 0 else sympy.Integer(0)
    env = ctx.shape_env
    if env is None:
        raise NotImplementedError(f"interior padding of a symbolic size {n} without a ShapeEnv")
    return n + (n - 1) * gap if env.evaluate(sympy.Gt(n, 0)) else sympy.Integer(0)


def _signed_div(pos: Expr, step: Expr) -> Expr:
    # Only evaluated where the mask holds (pos >= 0); elsewhere loads are clamped.
    return ModularIndexing(pos, step, sympy.Integer(2**62))


@register_lowering("slice_scatter")
def lower_slice_scatter(
    ctx: Any, a: TensorBox, src: TensorBox, dim: int, start: int, end: int, step: int
) -> TensorBox:
    size = a.get_size()
    dim = dim % len(size)
    src_len = src.get_size()[dim]
    load_a, load_src = a.make_loader(), src.make_loader()

    def inner_fn(ops: Any, index: Sequence[Expr]) -> Any:
        pos = index[dim] - start
        inside = _in_range(ops, pos, 0, src_len * step)
        if step != 1:
            inside = ops.logical_and(
                inside,
                ops.eq(
                    ops.mod(ops.index_expr(pos, torch.int64), ops.constant(step, torch.int64)),
                    ops.constant(0, torch.int64),
                ),
            )
        src_index = [
            ModularIndexing(pos, step, sympy.Integer(2**62)) if d == dim else i
            for d, i in enumerate(index)
        ]
        if step == 1:
            src_index[dim] = pos
        from_src = ops.masked(inside, lambda: load_src(ops, src_index), 0)
        return ops.where(inside, from_src, load_a(ops, index))

    return TensorBox(Pointwise(a.get_device(), a.get_dtype(), inner_fn, list(size)))
