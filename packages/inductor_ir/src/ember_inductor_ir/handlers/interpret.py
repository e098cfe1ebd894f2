"""A handler that evaluates a loop body with vectorized torch ops over an index grid.

Every iteration variable is bound to an ``arange`` shaped to broadcast over the kernel's grid
(outer dims first, then reduction dims), so one call of the body computes the whole
iteration space at once. It is the correctness oracle for lowerings and fusion: slow,
simple, and built from eager torch ops whose semantics the prims follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import sympy
import torch

from ember_primops.random import MASK32, mix32, stream_key

from ..errors import InterpretError
from ..indexing import FloorDiv, ModularIndexing
from ..ops import OP_NAMES, WELFORD

# One torch function per element-wise op: the table the interpreter dispatches through.
_TORCH_OPS: dict[str, Callable[..., torch.Tensor]] = {
    "abs": torch.abs,
    "neg": torch.neg,
    "sign": torch.sign,
    "reciprocal": torch.reciprocal,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "truediv": torch.true_divide,
    "floordiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "mod": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "signbit": torch.signbit,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "logical_not": torch.logical_not,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "bitwise_not": torch.bitwise_not,
    "shift_left": torch.bitwise_left_shift,
    "shift_right": torch.bitwise_right_shift,
}


def eval_index(expr: sympy.Expr, bindings: Mapping[sympy.Symbol, torch.Tensor]) -> Any:
    """Evaluate an index expression to an int64 tensor (or a Python int)."""
    if expr.is_Integer:
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        if expr not in bindings:
            raise InterpretError(f"index variable {expr} is not bound in this kernel")
        return bindings[expr]
    args = [eval_index(a, bindings) for a in expr.args]
    if expr.is_Add:
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if expr.is_Mul:
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(expr, FloorDiv):
        return args[0] // args[1]
    if isinstance(expr, ModularIndexing):
        return (args[0] // args[1]) % args[2]
    if isinstance(expr, sympy.Max):
        return torch.maximum(torch.as_tensor(args[0]), torch.as_tensor(args[1]))
    if isinstance(expr, sympy.Min):
        return torch.minimum(torch.as_tensor(args[0]), torch.as_tensor(args[1]))
    if expr.is_Pow and expr.args[1].is_Integer and int(expr.args[1]) >= 0:
        return args[0] ** int(expr.args[1])
    raise InterpretError(f"cannot evaluate index expression {expr} ({type(expr).__name__})")


class InterpretHandler:
    """Values are tensors broadcastable to ``grid``.

    ``storages`` maps buffer names to flat 1-D tensors over each buffer's whole storage;
    ``bindings`` maps iteration variables to broadcast-shaped aranges; ``reduce_dims`` are the
    grid dims a ``reduction`` combines.
    """

    def __init__(
        self,
        storages: MutableMapping[str, torch.Tensor],
        bindings: Mapping[sympy.Symbol, torch.Tensor],
        grid: tuple[int, ...],
        reduce_dims: tuple[int, ...],
        device: torch.device,
    ) -> None:
        self.storages = storages
        self.bindings = bindings
        self.grid = grid
        self.reduce_dims = reduce_dims
        self.device = device
        self._mask: torch.Tensor | None = None
        self.indirect: dict[sympy.Symbol, torch.Tensor] = {}

    def __getattr__(self, name: str) -> Callable[..., torch.Tensor]:
        if name in _TORCH_OPS:
            return _TORCH_OPS[name]
        if name in OP_NAMES:
            raise InterpretError(f"the interpreter has no implementation of ops.{name}")
        raise AttributeError(f"ops has no op named {name!r}")

    def _index(self, name: str, index: sympy.Expr) -> torch.Tensor:
        flat = torch.as_tensor(eval_index(index, self._all_bindings()), device=self.device)
        storage = self.storages[name]
        if self._mask is not None:
            # Lanes the mask turns off may point anywhere; clamp them to a valid element.
            flat = torch.where(self._mask, flat, torch.zeros_like(flat))
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= storage.numel()):
            raise InterpretError(
                f"index {index} of {name} leaves its storage of {storage.numel()} elements"
            )
        return flat

    def load(self, name: str, index: sympy.Expr) -> torch.Tensor:
        if name not in self.storages:
            raise InterpretError(f"load from buffer {name!r}, which holds no data yet")
        storage = self.storages[name]
        if storage.device != self.device:  # a 0-dim CPU tensor read by a device kernel
            storage = storage.to(self.device)
        return storage[self._index(name, index).to(storage.device)]

    def store(self, name: str, index: sympy.Expr, value: torch.Tensor) -> None:
        storage = self.storages[name]
        flat = torch.as_tensor(eval_index(index, self._all_bindings()), device=self.device)
        shape = torch.broadcast_shapes(flat.shape, torch.as_tensor(value).shape)
        storage[flat.expand(shape).reshape(-1)] = (
            torch.as_tensor(value, device=self.device).to(storage.dtype).expand(shape).reshape(-1)
        )

    def store_reduction(self, name: str, index: sympy.Expr, value: torch.Tensor) -> None:
        self.store(name, index, value)

    def constant(self, value: bool | int | float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(value, dtype=dtype, device=self.device)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> torch.Tensor:
        bindings = self._all_bindings()
        return torch.as_tensor(eval_index(expr, bindings), device=self.device).to(dtype)

    def _all_bindings(self) -> Mapping[sympy.Symbol, torch.Tensor]:
        return {**self.bindings, **self.indirect} if self.indirect else self.bindings

    def to_dtype(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return x.to(dtype)

    def to_dtype_bitcast(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return x.contiguous().view(dtype)

    def indirect_indexing(self, x: torch.Tensor, size: sympy.Expr) -> sympy.Symbol:
        symbol = sympy.Symbol(f"indirect{len(self.indirect)}", integer=True)
        x = torch.as_tensor(x, device=self.device).to(torch.int64)
        self.indirect[symbol] = torch.where(x < 0, x + int(size), x)
        return symbol

    def where(self, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(cond, a, b)

    def masked(self, mask: torch.Tensor, body: Callable[[], torch.Tensor], other: Any) -> Any:
        mask = torch.as_tensor(mask, device=self.device).expand(self.grid)
        saved = self._mask
        self._mask = mask if saved is None else (mask & saved)
        try:
            value = torch.as_tensor(body(), device=self.device)
        finally:
            self._mask = saved
        return torch.where(mask, value, torch.tensor(other, dtype=value.dtype))

    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: torch.Tensor
    ) -> Any:
        value = torch.as_tensor(value, device=self.device).expand(self.grid)
        outer = self.grid[: len(self.grid) - len(self.reduce_dims)]
        flat = value.reshape(*outer, -1)
        if rtype == WELFORD:
            count = flat.shape[-1]
            wide = flat.to(torch.promote_types(flat.dtype, torch.float32))  # accumulate wide
            mean = wide.mean(-1, keepdim=True)
            m2 = ((wide - mean) ** 2).sum(-1, keepdim=True)
            weight = torch.full_like(mean, count)
            return tuple(self._keep(t.squeeze(-1).to(dtype)) for t in (mean, m2, weight))
        reducers: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "sum": lambda t: t.sum(-1, dtype=dtype),
            "prod": lambda t: t.prod(-1, dtype=dtype),
            "max": lambda t: t.amax(-1),
            "min": lambda t: t.amin(-1),
            "argmax": lambda t: t.argmax(-1),
            "argmin": lambda t: t.argmin(-1),
            "any": lambda t: t.any(-1),
            "all": lambda t: t.all(-1),
            "xor_sum": _xor_sum,
        }
        if flat.shape[-1] == 0 and rtype in ("max", "min", "argmax", "argmin"):
            raise InterpretError(f"reduction {rtype!r} over an empty range has no identity")
        return self._keep(reducers[rtype](flat).to(dtype))

    def _keep(self, reduced: torch.Tensor) -> torch.Tensor:
        # Re-insert the reduced dims as size 1 so the result broadcasts over the grid.
        return reduced.reshape(*reduced.shape, *([1] * len(self.reduce_dims)))

    def random_bits(self, seed: torch.Tensor, counter: torch.Tensor, stream: int) -> torch.Tensor:
        # The same integer steps the prims' reference runs (ember_primops.random).
        key = stream_key(torch.as_tensor(seed, device=self.device), stream)
        n = torch.as_tensor(counter, device=self.device).to(torch.int64)
        return mix32(mix32((n & MASK32) ^ key) ^ (n >> 32))


def _xor_sum(t: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(t.shape[:-1], dtype=t.dtype, device=t.device)
    for k in range(t.shape[-1]):
        out = out ^ t[..., k]
    return out
