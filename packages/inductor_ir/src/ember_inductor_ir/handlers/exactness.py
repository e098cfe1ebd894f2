"""A handler that tracks which narrow float dtypes a body's values are exactly values of.

Values are frozensets of dtypes from NARROW_FLOATS: ``{bfloat16}`` for ``x.to(bf16)`` and
for that value widened again (float32 and float64 hold every bfloat16 value), the empty set
for anything the handler cannot prove exact (arithmetic, reductions, integers). The narrow
stores pass (narrow_stores.py) reads the set of a buffer's stored value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from ..ops import OP_NAMES

NARROW_FLOATS = (torch.bfloat16, torch.float16)
Exact = frozenset[torch.dtype]
NONE: Exact = frozenset()

#: ops whose result is exact wherever their operands are: they only pick or flip a value
_SELECTING_UNARY = frozenset({"neg", "abs"})
_SELECTING_BINARY = frozenset({"maximum", "minimum"})


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
    if not value.dtype.is_floating_point:
        return NONE
    kept = value.isnan()
    return frozenset(
        d for d in NARROW_FLOATS if bool(((value.to(d).to(value.dtype) == value) | kept).all())
    )


class ExactnessHandler:
    """``buffers``: for each buffer, the narrow dtypes its stored values are exact in (a
    load of a bfloat16 buffer is exactly bfloat16; so is one of a constant of such values)."""

    def __init__(self, buffers: Mapping[str, Exact]) -> None:
        self.buffers = buffers
        self.stored: dict[str, Exact] = {}

    def __getattr__(self, name: str) -> Callable[..., Exact]:
        if name not in OP_NAMES:
            raise AttributeError(f"ops has no op named {name!r}")
        if name in _SELECTING_UNARY:
            return lambda x: x
        if name in _SELECTING_BINARY:
            return lambda a, b: a & b
        return lambda *args, **kwargs: NONE

    def load(self, name: str, index: sympy.Expr) -> Exact:
        return self.buffers.get(name, NONE)

    def store(self, name: str, index: sympy.Expr, value: Exact) -> None:
        self.stored[name] = value

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        self.stored[name] = NONE

    def constant(self, value: object, dtype: torch.dtype) -> Exact:
        return constant_exactness(value, dtype)

    def to_dtype(self, x: Exact, dtype: torch.dtype) -> Exact:
        if dtype in NARROW_FLOATS:
            return frozenset({dtype})  # rounded to it: exactly one of its values
        if dtype in (torch.float32, torch.float64):
            return x  # widening: every narrow value survives
        return NONE

    def where(self, cond: Exact, a: Exact, b: Exact) -> Exact:
        return a & b

    def masked(self, mask: Exact, body: Callable[[], Exact], other: object) -> Exact:
        return body() & constant_exactness(other, torch.float64)

    def indirect_indexing(self, x: Exact, size: sympy.Expr) -> sympy.Symbol:
        return sympy.Symbol("indirect", integer=True)

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        return (NONE, NONE, NONE) if rtype == "welford" else NONE
