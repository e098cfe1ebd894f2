"""A handler that records what a loop body reads and writes (and how many ops it runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch

from ..ops import OP_NAMES, WELFORD

#: Math that costs many times an add (a libm call or a long polynomial): a value computing
#: one is worth storing once rather than recomputing in each reader.
TRANSCENDENTAL_OPS = frozenset(
    {
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf",
        "erfc", "erfinv", "lgamma", "pow", "atan2", "hypot",
    }
)  # fmt: skip
#: the transcendental ops that cost tens of instructions a call on a GPU as well (argument
#: reduction and a polynomial in libdevice), where exp, log, sigmoid and the like map to the
#: hardware's approximations: worth computing once rather than per broadcast copy (graph.py)
LIBM_HEAVY_OPS = frozenset(
    {
        "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
        "acosh", "atanh", "pow", "lgamma", "erfinv", "hypot",
    }
)  # fmt: skip


#: division and roots: on a GPU a correctly rounded division (what eager's `/` computes) is
#: about twenty instructions with a range check and a slow-path call, a root one or two
#: special-function ops beside it; a batch norm's per-channel statistics recomputed for each
#: element of its reader ran 60-100 instructions an element (graph.py, statistic epilogues)
DIVIDE_OR_ROOT_OPS = frozenset({"truediv", "reciprocal", "sqrt", "rsqrt"})


class ReadWriteHandler:
    """Values are ``None``. After running a body: ``reads``/``writes`` list (name, index);
    ``op_count`` ops, ``transcendental_count`` of them from TRANSCENDENTAL_OPS,
    ``heavy_count`` from LIBM_HEAVY_OPS, ``divide_count`` from DIVIDE_OR_ROOT_OPS."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, sympy.Expr]] = []
        self.writes: list[tuple[str, sympy.Expr]] = []
        self.reduction_types: list[str] = []
        self.op_count = 0
        self.transcendental_count = 0
        self.heavy_count = 0
        self.divide_count = 0
        self.uses_random = False
        self.indirect_count = 0

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name not in OP_NAMES:
            raise AttributeError(f"ops has no op named {name!r}")

        def op(*args: object) -> None:
            self.op_count += 1
            self.transcendental_count += name in TRANSCENDENTAL_OPS
            self.heavy_count += name in LIBM_HEAVY_OPS
            self.divide_count += name in DIVIDE_OR_ROOT_OPS

        return op

    def load(self, name: str, index: sympy.Expr) -> None:
        self.op_count += 1
        self.reads.append((name, index))

    def store(self, name: str, index: sympy.Expr, value: object) -> None:
        self.writes.append((name, index))

    store_reduction = store

    def indirect_indexing(self, x: object, size: sympy.Expr) -> sympy.Symbol:
        self.op_count += 1
        self.indirect_count += 1
        return sympy.Symbol(f"indirect{self.indirect_count - 1}", integer=True)

    def masked(self, mask: object, body: Callable[[], object], other: object) -> None:
        self.op_count += 1
        body()

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        self.op_count += 1
        self.reduction_types.append(rtype)
        return (None, None, None) if rtype == WELFORD else None

    def random_bits(self, seed: object, counter: object, stream: int) -> None:
        self.op_count += 1
        self.uses_random = True
