"""A handler that propagates dtypes through a loop body and checks the operand rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from ..errors import VerificationError
from ..ops import (
    BINARY_MATH_OPS,
    BITWISE_OPS,
    CLASSIFY_OPS,
    COMPARISON_OPS,
    LOGICAL_OPS,
    REDUCTION_TYPES,
    UNARY_MATH_OPS,
    WELFORD,
)

_SAME_DTYPE_OPS = set(BINARY_MATH_OPS) | set(BITWISE_OPS) | set(COMPARISON_OPS)


class DtypeHandler:
    """Values are ``torch.dtype``. ``buffer_dtypes`` gives the dtype a ``load`` returns."""

    def __init__(self, buffer_dtypes: Mapping[str, torch.dtype]) -> None:
        self.buffer_dtypes = buffer_dtypes
        self.stored: dict[str, torch.dtype] = {}

    def __getattr__(self, name: str) -> Callable[..., torch.dtype]:
        if name in UNARY_MATH_OPS or name in ("bitwise_not",):
            return lambda x: x
        if name in CLASSIFY_OPS or name == "logical_not":
            return lambda x: torch.bool
        if name in _SAME_DTYPE_OPS:

            def binary(a: torch.dtype, b: torch.dtype) -> torch.dtype:
                if a != b:
                    raise VerificationError(f"ops.{name} got mixed dtypes {a} and {b}")
                if name == "truediv" and not (a.is_floating_point or a.is_complex):
                    raise VerificationError(f"ops.truediv on {a}: use truncdiv for integers")
                return torch.bool if name in COMPARISON_OPS else a

            return binary
        if name in LOGICAL_OPS:
            return lambda a, b: torch.bool
        raise AttributeError(f"ops has no op named {name!r}")

    def load(self, name: str, index: sympy.Expr) -> torch.dtype:
        if name not in self.buffer_dtypes:
            raise VerificationError(f"load from unknown buffer {name!r}")
        return self.buffer_dtypes[name]

    def store(self, name: str, index: sympy.Expr, value: torch.dtype) -> None:
        self.stored[name] = value

    store_reduction = store

    def constant(self, value: object, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> torch.dtype:
        if dtype.is_floating_point or dtype == torch.bool:
            raise VerificationError(f"index_expr must produce an integer dtype, got {dtype}")
        return dtype

    def to_dtype(self, x: torch.dtype, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def to_dtype_bitcast(self, x: torch.dtype, dtype: torch.dtype) -> torch.dtype:
        if x.itemsize != dtype.itemsize:
            raise VerificationError(f"bitcast between sizes: {x} -> {dtype}")
        return dtype

    def indirect_indexing(self, x: torch.dtype, size: sympy.Expr) -> sympy.Symbol:
        if x not in (torch.int64, torch.int32):
            raise VerificationError(f"indirect_indexing needs an int32/int64 value, got {x}")
        return sympy.Symbol("indirect", integer=True)

    def where(self, cond: torch.dtype, a: torch.dtype, b: torch.dtype) -> torch.dtype:
        if cond != torch.bool:
            raise VerificationError(f"ops.where condition must be bool, got {cond}")
        if a != b:
            raise VerificationError(f"ops.where got mixed dtypes {a} and {b}")
        return a

    def masked(self, mask: torch.dtype, body: Callable[[], torch.dtype], other: object) -> Any:
        if mask != torch.bool:
            raise VerificationError(f"ops.masked mask must be bool, got {mask}")
        return body()

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        if value != src_dtype:
            raise VerificationError(f"reduction {rtype!r}: value is {value}, said {src_dtype}")
        if rtype == WELFORD:
            return (dtype, dtype, dtype)
        if rtype not in REDUCTION_TYPES:
            raise VerificationError(f"unknown reduction type {rtype!r}")
        return dtype

    def random_bits(self, seed: torch.dtype, counter: torch.dtype, stream: int) -> torch.dtype:
        if seed != torch.int64 or counter != torch.int64:
            raise VerificationError(
                f"random_bits needs int64 seed and counter, got {seed}, {counter}"
            )
        return torch.int64
