"""A handler that tracks which narrow float dtypes a body's values are exactly values of.

Values are pairs (dtype, exact): the value's dtype (handlers/dtypes.py rules) and the set of
dtypes from NARROW_FLOATS that hold it exactly. A value of a narrow dtype is exactly one of
its values (the loop IR's meaning; code generators that compute bfloat16 ops in float32
round when such a value is converted, as eager rounds every op), and stays exact when
widened to float32 or float64; a selection of exact values (where, neg, abs, max, min) is
exact; a constant is when it round-trips. Anything else (arithmetic on float32 values,
reductions) is not proven exact. The narrow stores pass (narrow_stores.py) reads the set of
a buffer's stored value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from .dtypes import DtypeHandler

NARROW_FLOATS = (torch.bfloat16, torch.float16)
Exact = frozenset[torch.dtype]
Value = tuple[torch.dtype, Exact]
NONE: Exact = frozenset()

#: ops whose result is exact wherever their operands are: they only pick or flip a value
_SELECTING: dict[str, Callable[..., Exact]] = {
    "neg": lambda x: x,
    "abs": lambda x: x,
    "maximum": lambda a, b: a & b,
    "minimum": lambda a, b: a & b,
}


def constant_exactness(value: object, dtype: torch.dtype) -> Exact:
    """The narrow dtypes that hold ``value`` (as ``dtype`` rounds it) exactly."""
    if not dtype.is_floating_point or isinstance(value, bool):
        return NONE
    try:
        wide = torch.tensor(float(value), dtype=dtype)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return NONE  # a symbolic constant (a scalar read on the host)
    if math.isnan(wide.item()):
        return frozenset(NARROW_FLOATS)
    return frozenset(d for d in NARROW_FLOATS if wide.to(d).to(dtype).item() == wide.item())


def tensor_exactness(value: torch.Tensor) -> Exact:
    """The narrow dtypes that hold every element of ``value`` exactly (NaNs aside)."""
    if value.dtype in NARROW_FLOATS:
        return frozenset({value.dtype})
    if not value.dtype.is_floating_point or value.device.type == "meta":
        return NONE
    kept = value.isnan()
    return frozenset(
        d for d in NARROW_FLOATS if bool(((value.to(d).to(value.dtype) == value) | kept).all())
    )


def _value(dtype: torch.dtype, exact: Exact = NONE) -> Value:
    return dtype, exact | {dtype} if dtype in NARROW_FLOATS else exact


class ExactnessHandler:
    """``buffer_dtypes``: each buffer's storage dtype; ``known``: the narrow dtypes a load of
    a buffer is exact in beyond its own dtype (a constant of bfloat16 values)."""

    def __init__(
        self, buffer_dtypes: Mapping[str, torch.dtype], known: Mapping[str, Exact] | None = None
    ) -> None:
        self.types = DtypeHandler(buffer_dtypes)
        self.known = known or {}
        self.stored: dict[str, Value] = {}

    def __getattr__(self, name: str) -> Callable[..., Value]:
        typed = getattr(self.types, name)  # AttributeError for what is not an op
        rule = _SELECTING.get(name)

        def op(*args: Value) -> Value:
            dtype = typed(*(a[0] for a in args))
            return _value(dtype, rule(*(a[1] for a in args)) if rule else NONE)

        return op

    def load(self, name: str, index: sympy.Expr) -> Value:
        return _value(self.types.load(name, index), self.known.get(name, NONE))

    def store(self, name: str, index: sympy.Expr, value: Value) -> None:
        self.stored[name] = value

    store_reduction = store

    def constant(self, value: object, dtype: torch.dtype) -> Value:
        return _value(dtype, constant_exactness(value, dtype))

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        return _value(self.types.index_expr(expr, dtype))

    def to_dtype(self, x: Value, dtype: torch.dtype) -> Value:
        if dtype in (torch.float32, torch.float64):
            return _value(dtype, x[1])  # widening: every narrow value survives
        return _value(dtype)  # to a narrow dtype: exactly one of its values (by _value)

    def to_dtype_bitcast(self, x: Value, dtype: torch.dtype) -> Value:
        return _value(self.types.to_dtype_bitcast(x[0], dtype))

    def indirect_indexing(self, x: Value, size: sympy.Expr) -> sympy.Symbol:
        return self.types.indirect_indexing(x[0], size)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        return _value(self.types.where(cond[0], a[0], b[0]), a[1] & b[1])

    def masked(self, mask: Value, body: Callable[[], Value], other: object) -> Value:
        dtype, exact = body()
        return _value(dtype, exact & constant_exactness(other, torch.float64))

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        result = self.types.reduction(dtype, src_dtype, rtype, value[0])
        return tuple(_value(d) for d in result) if isinstance(result, tuple) else _value(result)

    def random_bits(self, seed: Value, counter: Value, stream: int) -> Value:
        return _value(self.types.random_bits(seed[0], counter[0], stream))
