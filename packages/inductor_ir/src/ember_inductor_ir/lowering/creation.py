"""Lowerings of the creation prims: constants and ramps computed inside the kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ..errors import DynamicShapeUnsupported
from ..nodes import Pointwise, TensorBox
from .registry import register_lowering


def _filled(shape: Sequence[Any], value: Any, dtype: torch.dtype, device: Any) -> TensorBox:
    if getattr(value, "free_symbols", None):  # a size (symbolic): computed by the kernel
        return TensorBox(
            Pointwise(torch.device(device), dtype, _size_value(value, dtype), list(shape))
        )

    def inner_fn(ops: Any, index: Any) -> Any:
        return ops.constant(value, dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, list(shape)))


#: a comparison of integer expressions (a SymBool: `bool(n)` is `Ne(n, 0)`) -> its ops name
_RELATIONS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _relation_value(value: sympy.Rel, dtype: torch.dtype) -> Any:
    """A body computing a comparison, as the kernel's compare op: of integer expressions in
    int64 index math, of expressions over float reads (`bool(x.item())` of a float) in
    float64 constants of the kernel's float scalar arguments."""
    sides = (value.lhs, value.rhs)
    if value.rel_op not in _RELATIONS:
        raise DynamicShapeUnsupported(f"a scalar {value} that is not a comparison")
    compare = _RELATIONS[value.rel_op]
    exact = all(side.is_integer for side in sides)

    def side_of(ops: Any, side: sympy.Expr) -> Any:
        if exact:
            return ops.index_expr(side, torch.int64)
        if side.is_integer and side.free_symbols:  # a size beside a float: made a float
            return ops.to_dtype(ops.index_expr(side, torch.int64), torch.float64)
        return ops.constant(side if side.free_symbols else float(side), torch.float64)

    def inner_fn(ops: Any, index: Any) -> Any:
        lhs, rhs = (side_of(ops, side) for side in sides)
        return ops.to_dtype(getattr(ops, compare)(lhs, rhs), dtype)

    return inner_fn


def _size_value(value: sympy.Expr, dtype: torch.dtype) -> Any:
    """A body computing a symbolic scalar: an integer expression as int64 index math; a
    float one (``2 / numel`` of a mean's gradient) as c * P / Q with P, Q integer
    expressions of the sizes, divided in ``dtype``; a comparison of integer expressions as
    a compare op."""
    if isinstance(value, sympy.Rel):
        return _relation_value(value, dtype)
    if value.is_integer:
        return lambda ops, index: ops.to_dtype(ops.index_expr(value, torch.int64), dtype)
    if any(not s.is_integer for s in value.free_symbols):
        # over a float read on the host (t.item()): a constant of the kernel's float scalar
        # arguments (the target prints the expression over them)
        return lambda ops, index: ops.constant(value, dtype)
    num, den = value.as_numer_denom()
    c_num, p = num.as_coeff_Mul()
    c_den, q = den.as_coeff_Mul()
    if not (p.is_integer and q.is_integer):
        raise DynamicShapeUnsupported(f"a scalar {value} that is not a ratio of sizes")
    coeff = float(c_num) / float(c_den)

    def inner_fn(ops: Any, index: Any) -> Any:
        ratio = ops.truediv(
            ops.to_dtype(ops.index_expr(p, torch.int64), dtype),
            ops.to_dtype(ops.index_expr(q, torch.int64), dtype),
        )
        return ratio if coeff == 1.0 else ops.mul(ops.constant(coeff, dtype), ratio)

    return inner_fn


@register_lowering("full")
def lower_full(
    ctx: Any, shape: Sequence[int], fill_value: Any, *, dtype: torch.dtype, device: Any
) -> TensorBox:
    return _filled(shape, fill_value, dtype, device)


@register_lowering("scalar_tensor")
def lower_scalar_tensor(ctx: Any, s: Any, *, dtype: torch.dtype, device: Any) -> TensorBox:
    return _filled([], s, dtype, device)


@register_lowering("empty_strided", "empty_permuted")
def lower_empty(ctx: Any, shape: Sequence[int], _layout: Any, *, dtype: torch.dtype, device: Any):
    # Uninitialized memory by contract: any value is correct; zeros keep runs reproducible.
    return _filled(shape, False if dtype == torch.bool else 0, dtype, device)


@register_lowering("iota")
def lower_iota(
    ctx: Any, length: int, *, start: int, step: int, dtype: torch.dtype, device: Any
) -> TensorBox:
    def inner_fn(ops: Any, index: Any) -> Any:
        # Like the prim: computed in int64, then converted.
        return ops.to_dtype(ops.index_expr(index[0] * step + start, torch.int64), dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, [length]))
