"""A handler that renders a loop body as numbered SSA lines (the readable dump)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sympy
import torch

from ..ops import OP_NAMES, WELFORD


@functools.lru_cache(maxsize=16384)
def expr_text(expr: sympy.Basic) -> str:
    """``str(expr)``, memoized: sympy prints the same few hundred indices afresh each time,
    and the dump prints every body of the graph."""
    return str(expr)


def format_arg(arg: object) -> str:
    if isinstance(arg, torch.dtype):
        return str(arg).removeprefix("torch.")
    if isinstance(arg, sympy.Basic):
        return expr_text(arg)
    return repr(arg) if isinstance(arg, str) and not arg.startswith("tmp") else str(arg)


class PrinterHandler:
    """Values are SSA names (``tmp0``, ``tmp1`` ...); ``lines`` collects the body text."""

    def __init__(self, indent: str = "") -> None:
        self.lines: list[str] = []
        self._next = 0
        self._indent = indent

    def _emit(self, text: str) -> str:
        name = f"tmp{self._next}"
        self._next += 1
        self.lines.append(f"{self._indent}{name} = {text}")
        return name

    def __getattr__(self, name: str) -> Callable[..., str]:
        if name not in OP_NAMES:
            raise AttributeError(f"ops has no op named {name!r}")

        def op(*args: object) -> str:
            return self._emit(f"{name}({', '.join(format_arg(a) for a in args)})")

        return op

    def load(self, name: str, index: sympy.Expr) -> str:
        return self._emit(f"load({name}, {expr_text(index)})")

    def store(self, name: str, index: sympy.Expr, value: str) -> None:
        self.lines.append(f"{self._indent}store({name}, {expr_text(index)}, {value})")

    def store_reduction(self, name: str, index: sympy.Expr, value: str) -> None:
        text = f"store_reduction({name}, {expr_text(index)}, {value})"
        self.lines.append(f"{self._indent}{text}")

    def indirect_indexing(self, x: str, size: sympy.Expr) -> sympy.Symbol:
        self.lines.append(f"{self._indent}ind_{x} = indirect_indexing({x}, {size})")
        return sympy.Symbol(f"ind_{x}", integer=True)

    def masked(self, mask: str, body: Callable[[], str], other: object) -> str:
        self.lines.append(f"{self._indent}masked({mask}) {{")
        saved, self._indent = self._indent, self._indent + "  "
        inner = body()
        self.lines.append(f"{self._indent}yield {inner}")
        self._indent = saved
        self.lines.append(f"{self._indent}}} else {format_arg(other)}")
        return self._emit(f"masked_result({inner}, {mask}, {format_arg(other)})")

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: str) -> Any:
        text = f"reduction({format_arg(dtype)}, {format_arg(src_dtype)}, {rtype!r}, {value})"
        result = self._emit(text)
        if rtype == WELFORD:
            return tuple(self._emit(f"{result}[{k}]") for k in range(3))
        return result
