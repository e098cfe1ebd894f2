"""Lowerings of the element-wise prims (unary, binary, comparison, ternary) to Pointwise."""

from __future__ import annotations

from typing import Any

import torch

from ..nodes import TensorBox
from ..ops import UNARY_MATH_OPS
from ._helpers import is_float, pointwise
from .registry import register_lowering

# prim name -> ops name, where the op computes exactly what the prim does (the unary math
# prims share their names with the ops).
_SAME_DTYPE_UNARY = {name: name for name in [*UNARY_MATH_OPS, "bitwise_not"]}
_BOOL_UNARY = {
    "isnan": "isnan",
    "isinf": "isinf",
    "signbit": "signbit",
    "logical_not": "logical_not",
}
_SAME_DTYPE_BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "floor_divide": "floordiv",
    "remainder": "mod",
    "fmod": "fmod",
    "pow": "pow",
    "atan2": "atan2",
    "hypot": "hypot",
    "copysign": "copysign",
    "nextafter": "nextafter",
    "maximum": "maximum",
    "minimum": "minimum",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right",
}
_BOOL_BINARY = {
    name: name
    for name in ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
}


def _unary(op_name: str, to_bool: bool) -> Any:
    def lower(ctx: Any, a: TensorBox) -> TensorBox:
        dtype = torch.bool if to_bool else a.get_dtype()
        return pointwise([a], lambda ops, x: getattr(ops, op_name)(x), dtype)

    lower.__name__ = f"lower_{op_name}"
    return lower


def _binary(op_name: str, to_bool: bool) -> Any:
    def lower(ctx: Any, a: TensorBox, b: TensorBox) -> TensorBox:
        dtype = torch.bool if to_bool else a.get_dtype()
        return pointwise([a, b], lambda ops, x, y: getattr(ops, op_name)(x, y), dtype)

    lower.__name__ = f"lower_{op_name}"
    return lower


for _prim, _op in _SAME_DTYPE_UNARY.items():
    register_lowering(_prim)(_unary(_op, to_bool=False))
for _prim, _op in _BOOL_UNARY.items():
    register_lowering(_prim)(_unary(_op, to_bool=True))
for _prim, _op in _SAME_DTYPE_BINARY.items():
    register_lowering(_prim)(_binary(_op, to_bool=False))
for _prim, _op in _BOOL_BINARY.items():
    register_lowering(_prim)(_binary(_op, to_bool=True))


@register_lowering("div")
def lower_div(ctx: Any, a: TensorBox, b: TensorBox) -> TensorBox:
    """True division for floats, truncation for integers (the prim's contract)."""
    op_name = "truediv" if is_float(a.get_dtype()) else "truncdiv"
    return pointwise([a, b], lambda ops, x, y: getattr(ops, op_name)(x, y), a.get_dtype())


@register_lowering("isfinite")
def lower_isfinite(ctx: Any, a: TensorBox) -> TensorBox:
    if not is_float(a.get_dtype()):
        return pointwise([a], lambda ops, x: ops.constant(True, torch.bool), torch.bool)
    return pointwise(
        [a],
        lambda ops, x: ops.logical_not(ops.logical_or(ops.isnan(x), ops.isinf(x))),
        torch.bool,
    )


def _nan_ignoring(op_name: str) -> Any:
    def lower(ctx: Any, a: TensorBox, b: TensorBox) -> TensorBox:
        dtype = a.get_dtype()
        if not is_float(dtype):
            return pointwise([a, b], lambda ops, x, y: getattr(ops, op_name)(x, y), dtype)

        def combine(ops: Any, x: Any, y: Any) -> Any:
            both = getattr(ops, op_name)(x, y)
            return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, both))

        return pointwise([a, b], combine, dtype)

    return lower


register_lowering("fmax")(_nan_ignoring("maximum"))
register_lowering("fmin")(_nan_ignoring("minimum"))


@register_lowering("where")
def lower_where(ctx: Any, pred: TensorBox, a: TensorBox, b: TensorBox) -> TensorBox:
    return pointwise([pred, a, b], lambda ops, c, x, y: ops.where(c, x, y), a.get_dtype())
