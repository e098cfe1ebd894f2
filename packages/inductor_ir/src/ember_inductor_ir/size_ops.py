"""Size arithmetic nodes of a prim graph (``aten.sym_size.int``, ``operator.*`` on sizes)
evaluated at lowering time: on static graphs they are ints, on symbolic ones sympy
expressions over the size symbols (the same symbols the loop IR's sizes use)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import sympy
import torch

from .indexing import FloorDiv


def _sympy(value: Any) -> Any:
    return sympy.Integer(value) if isinstance(value, int) else value


def _floordiv(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return FloorDiv(_sympy(a), _sympy(b))


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return sympy.Mod(_sympy(a), _sympy(b))


def _symbolic(*values: Any) -> bool:
    return any(isinstance(v, sympy.Basic) and v.free_symbols for v in values)


def _static(value: Any) -> Any:
    """An int where the expression is a number (lowerings then see plain ints)."""
    return int(value) if isinstance(value, sympy.Basic) and value.is_Integer else value


def _size(box: Any, dim: int) -> Any:
    return _static(box.get_size()[dim])


def _compare(relation: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A comparison of sizes or host scalars (a ``torch._check`` condition): a bool on
    numbers, else the sympy relation, left unsimplified (RELATIONS: the env assumed it
    while tracing, and the check must still test it on each call)."""

    def compare(a: Any, b: Any) -> Any:
        if not _symbolic(a, b):
            return bool(relation(a, b))
        return relation(_sympy(a), _sympy(b))

    return compare


#: comparisons: their results are conditions (asserted on the host), never sizes
RELATIONS: dict[Any, Callable[..., Any]] = {
    operator.ge: _compare(sympy.Ge),
    operator.gt: _compare(sympy.Gt),
    operator.le: _compare(sympy.Le),
    operator.lt: _compare(sympy.Lt),
    operator.eq: _compare(sympy.Eq),
    operator.ne: _compare(sympy.Ne),
}

#: size op -> how it evaluates on ints / sympy expressions
SIZE_OPS: dict[Any, Callable[..., Any]] = {
    torch.ops.aten.sym_size.int: _size,
    operator.add: lambda a, b: _static(_sympy(a) + _sympy(b)),
    operator.sub: lambda a, b: _static(_sympy(a) - _sympy(b)),
    operator.mul: lambda a, b: _static(_sympy(a) * _sympy(b)),
    operator.floordiv: lambda a, b: _static(_floordiv(a, b)),
    operator.truediv: lambda a, b: a / b if not _symbolic(a, b) else _sympy(a) / _sympy(b),
    operator.mod: lambda a, b: _static(_mod(a, b)),
    # a power of a size or host scalar (`k * k * k` of an item is sympy's k**3)
    operator.pow: lambda a, b: a**b if not _symbolic(a, b) else _static(_sympy(a) ** _sympy(b)),
    torch.sym_max: lambda a, b: _static(sympy.Max(_sympy(a), _sympy(b))),
    torch.sym_min: lambda a, b: _static(sympy.Min(_sympy(a), _sympy(b))),
}
