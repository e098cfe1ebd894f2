"""A handler that counts the ops a body runs for each step of its innermost loop.

Whether a pointwise value read by several users is stored once or recomputed in each reader
depends on what recomputing costs (Target.inline_op_limit). Ops whose inputs stay the
same along the innermost loop variable cost nothing there: the compiler hoists them out of
the loop (a batch norm's per-channel scale and shift, ``invstd * w`` and
``b - mean * invstd * w`` rounded as eager rounds them, is a dozen such ops around the two
that touch each element). Counting them made the batch-norm output the cnn's backward
recomputes (for the ReLU's mask) a stored buffer: a pass writing the whole feature map and
passes reading it back, where its two readers (the per-channel sums and the input gradient)
compute it from the convolution's output they read anyway (layer 1: 1.3 ms a step).

Values are invariant or varying; only ops with a varying input count (loads and index
expressions vary when their index names the innermost variable, or a symbol from an
indirect load of a varying value). Expensive ops count even when invariant (LONG_OPS: a
division, a square root, a libm call): g++ was seen leaving a batch norm's per-channel
``1 / sqrt(var + eps)`` inside a max-pool's window loop (that kernel: 0.7 -> 17 ms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch

from ..ops import OP_NAMES, WELFORD
from .readwrite import TRANSCENDENTAL_OPS

#: ops worth storing once even where they look loop-invariant (see the module docstring)
LONG_OPS = TRANSCENDENTAL_OPS | {
    "sqrt", "rsqrt", "truediv", "reciprocal", "floordiv", "truncdiv", "fmod", "mod",
}  # fmt: skip


class _Value:
    __slots__ = ("varies",)

    def __init__(self, varies: bool) -> None:
        self.varies = varies


INVARIANT = _Value(False)
VARYING = _Value(True)


def _varies(args: tuple) -> bool:
    return any(isinstance(a, _Value) and a.varies for a in args)


class InnerLoopCostHandler:
    """After running a body: ``op_count`` and ``transcendental_count`` of the ops that run
    once per step of ``inner`` (the innermost loop variable)."""

    def __init__(self, inner: sympy.Symbol) -> None:
        self.moving: set[sympy.Symbol] = {inner}
        self.op_count = 0
        self.transcendental_count = 0
        self._indirect = 0

    def _count(self, name: str, varies: bool) -> _Value:
        if varies or name in LONG_OPS:
            self.op_count += 1
            self.transcendental_count += name in TRANSCENDENTAL_OPS
        return VARYING if varies else INVARIANT

    def _moves(self, index: sympy.Expr) -> bool:
        return bool(sympy.sympify(index).free_symbols & self.moving)

    def __getattr__(self, name: str) -> Callable[..., _Value]:
        if name not in OP_NAMES:
            raise AttributeError(f"ops has no op named {name!r}")
        return lambda *args: self._count(name, _varies(args))

    def load(self, name: str, index: sympy.Expr) -> _Value:
        return self._count("load", self._moves(index))

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> _Value:
        return self._count("index_expr", self._moves(expr))

    def constant(self, value: object, dtype: torch.dtype) -> _Value:
        return INVARIANT

    def store(self, name: str, index: sympy.Expr, value: object) -> None:
        return None

    store_reduction = store

    def indirect_indexing(self, x: object, size: sympy.Expr) -> sympy.Symbol:
        symbol = sympy.Symbol(f"indirect{self._indirect}", integer=True)
        self._indirect += 1
        if _varies((x,)):
            self.moving.add(symbol)
            self.op_count += 1
        return symbol

    def masked(self, mask: object, body: Callable[[], object], other: object) -> _Value:
        return self._count("masked", _varies((mask, body())))

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        result = self._count("reduction", True)
        return (result, result, result) if rtype == WELFORD else result

    def random_bits(self, seed: object, counter: object, stream: int) -> _Value:
        return self._count("random_bits", True)
