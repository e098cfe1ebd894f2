"""Lowerings of the reduction prims: the reduced dims move to the reduction loops."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ..indexing import Expr, product
from ..nodes import Pointwise, Reduction, TensorBox
from ..ops import WELFORD
from ._helpers import normalize_dims, pointwise
from .registry import register_lowering


def _split(size: Sequence[Expr], dims: Sequence[int]) -> tuple[list[int], list[int]]:
    kept = [d for d in range(len(size)) if d not in dims]
    return kept, list(dims)


def make_reduction(
    value: TensorBox,
    dims: Sequence[int],
    reduction_type: str,
    dtype: torch.dtype,
    *,
    convert: Any = None,
    welford_part: int | None = None,
) -> TensorBox:
    """Reduce ``value`` over ``dims`` (removed from the result).

    ``convert(ops, x)`` rewrites each element first (e.g. to bool for any/all).
    """
    size = value.get_size()
    dims = normalize_dims(dims, len(size))
    kept, reduced = _split(size, dims)
    loader = value.make_loader()

    def full_index(index: Sequence[Expr], rindex: Sequence[Expr]) -> list[Expr]:
        out: list[Expr] = [sympy.Integer(0)] * len(size)
        for d, i in zip(kept, index, strict=True):
            out[d] = i
        for d, r in zip(reduced, rindex, strict=True):
            out[d] = r
        return out

    def inner_fn(ops: Any, index: Sequence[Expr], rindex: Sequence[Expr]) -> Any:
        element = loader(ops, full_index(index, rindex))
        return convert(ops, element) if convert is not None else element

    reduced_sizes = [size[d] for d in reduced]
    unrolled = _unrolled(value, reduction_type, dtype, convert, reduced_sizes, inner_fn)
    # a reduction to one element stays one: its kernel can be the one that reduces its
    # rows' values (a loss's sum over a batch of six, over the per-row losses)
    if unrolled is not None and product([size[d] for d in kept]) != 1:
        return TensorBox(unrolled([size[d] for d in kept]))
    src_dtype = torch.bool if reduction_type in ("any", "all") else value.get_dtype()
    if reduction_type == WELFORD:
        src_dtype = value.get_dtype()
    return TensorBox(
        Reduction(
            value.get_device(),
            dtype,
            src_dtype,
            inner_fn,
            [size[d] for d in kept],
            [size[d] for d in reduced],
            reduction_type,
            welford_part,
        )
    )


#: a reduction over at most this many elements (static sizes) is a pointwise body that
#: combines them one after another: a reader then computes it inline (ResNeSt's sum over
#: its two radix halves, read by the mean over H x W, no longer writes and rereads a
#: feature map), where a kernel of its own had loops of two steps
UNROLL_MAX = 8
#: the combining op of each reduction an unrolled body can compute, and whether it
#: accumulates in float32 for a narrower float (as the reduction kernels do)
_UNROLLED_COMBINE = {"sum": ("add", True), "prod": ("mul", True), "max": ("maximum", False),
                     "min": ("minimum", False)}  # fmt: skip


def _unrolled(
    value: TensorBox,
    reduction_type: str,
    dtype: torch.dtype,
    convert: Any,
    reduced_sizes: Sequence[Expr],
    inner_fn: Any,
) -> Any:
    """A builder of the Pointwise that computes a small reduction element by element, or
    None when the reduction is not one (symbolic or long rows, another kind)."""
    if reduction_type not in _UNROLLED_COMBINE or convert is not None or dtype == torch.bool:
        return None
    if not all(isinstance(s, (int, sympy.Integer)) for s in reduced_sizes):
        return None
    count = int(product(reduced_sizes))
    if count < 1 or count > UNROLL_MAX:
        return None
    combine, widens = _UNROLLED_COMBINE[reduction_type]
    acc_dtype = (
        torch.float32 if widens and dtype.is_floating_point and dtype.itemsize < 4 else dtype
    )
    points = list(itertools.product(*[range(int(s)) for s in reduced_sizes]))

    def body(ops: Any, index: Sequence[Expr]) -> Any:
        acc = None
        for point in points:
            element = inner_fn(ops, index, [sympy.Integer(r) for r in point])
            if acc_dtype != dtype:
                element = ops.to_dtype(element, acc_dtype)
            acc = element if acc is None else getattr(ops, combine)(acc, element)
        return ops.to_dtype(acc, dtype) if acc_dtype != dtype else acc

    return lambda ranges: Pointwise(value.get_device(), dtype, body, ranges)


def _identity_if_empty(ctx: Any, value: TensorBox, dims: Sequence[int]) -> TensorBox | None:
    """Reducing over no dims is a copy (a reduction with no loops would be a pointwise)."""
    if normalize_dims(dims, len(value.get_size())):
        return None
    return pointwise([value], lambda ops, x: x, value.get_dtype())


def _simple(reduction_type: str) -> Any:
    def lower(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
        copy = _identity_if_empty(ctx, a, dims)
        if copy is not None:
            return copy
        return make_reduction(a, dims, reduction_type, a.get_dtype())

    return lower


register_lowering("sum")(_simple("sum"))
register_lowering("prod")(_simple("prod"))
register_lowering("amax")(_simple("max"))
register_lowering("amin")(_simple("min"))
register_lowering("xor_sum")(_simple("xor_sum"))


def _boolean(reduction_type: str) -> Any:
    def lower(ctx: Any, a: TensorBox, dims: Sequence[int]) -> TensorBox:
        def to_bool(ops: Any, x: Any) -> Any:
            if a.get_dtype() == torch.bool:
                return x
            return ops.ne(x, ops.constant(0, a.get_dtype()))

        if not normalize_dims(dims, len(a.get_size())):
            return pointwise([a], to_bool, torch.bool)
        return make_reduction(a, dims, reduction_type, torch.bool, convert=to_bool)

    return lower


register_lowering("any")(_boolean("any"))
register_lowering("all")(_boolean("all"))


def _arg(reduction_type: str) -> Any:
    def lower(ctx: Any, a: TensorBox, dim: int) -> TensorBox:
        return make_reduction(a, [dim], reduction_type, torch.int64)

    return lower


register_lowering("argmax")(_arg("argmax"))
register_lowering("argmin")(_arg("argmin"))


def _variance(ctx: Any, a: TensorBox, dims: Sequence[int], correction: float) -> TensorBox:
    size = a.get_size()
    dims = normalize_dims(dims, len(size))
    count = product([size[d] for d in dims])
    m2 = make_reduction(a, dims, WELFORD, a.get_dtype(), welford_part=1)
    ctx.realize(m2)
    dtype = a.get_dtype()

    def finish(ops: Any, x: Any) -> Any:
        # Like eager: a non-positive denominator gives inf/nan, not an error.
        if getattr(count, "free_symbols", None):  # symbolic sizes: counted in the kernel
            n = ops.to_dtype(ops.index_expr(count, torch.int64), dtype)
            return ops.truediv(x, ops.sub(n, ops.constant(float(correction), dtype)))
        return ops.truediv(x, ops.constant(float(count) - float(correction), dtype))

    return pointwise([m2], _nan_if_empty(count, finish, dtype), dtype)


def _nan_if_empty(count: Any, finish: Any, dtype: torch.dtype) -> Any:
    """Eager's variance and mean of no elements are nan (a welford of nothing is 0)."""
    if count != 0:
        return finish
    return lambda ops, x: ops.constant(float("nan"), dtype)


@register_lowering("var")
def lower_var(ctx: Any, a: TensorBox, dims: Sequence[int], correction: float) -> TensorBox:
    return _variance(ctx, a, dims, correction)


@register_lowering("var_mean")
def lower_var_mean(
    ctx: Any, a: TensorBox, dims: Sequence[int], correction: float
) -> tuple[TensorBox, TensorBox]:
    mean = make_reduction(a, dims, WELFORD, a.get_dtype(), welford_part=0)
    ctx.realize(mean)
    size = a.get_size()
    count = product([size[d] for d in normalize_dims(dims, len(size))])
    if count == 0:
        mean = pointwise([mean], _nan_if_empty(count, None, a.get_dtype()), a.get_dtype())
    return _variance(ctx, a, dims, correction), mean


__all__ = ["Pointwise", "make_reduction"]
