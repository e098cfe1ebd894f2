"""The table itself: aten overload -> decomposition, filled by `register_decomposition`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

import torch

log = logging.getLogger("ember.decompositions")

_TABLE: dict[torch._ops.OpOverload, Callable] = {}

F = TypeVar("F", bound=Callable)


class DuplicateDecomposition(RuntimeError):
    """Two decompositions were registered for the same aten overload."""


def _overloads(op: torch._ops.OpOverload | torch._ops.OpOverloadPacket):
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    raise TypeError(f"expected an aten OpOverload or OpOverloadPacket, got {op!r}")


def register_decomposition(*ops: torch._ops.OpOverload) -> Callable[[F], F]:
    """Register the decorated function as the decomposition of each given overload.

    The function receives the overload's arguments exactly as aten does (positional and
    keyword) and returns what the aten op returns, computed with prims and other aten ops
    (which decompose recursively).
    """

    def decorate(fn: F) -> F:
        for op in ops:
            for overload in _overloads(op):
                if overload in _TABLE:
                    raise DuplicateDecomposition(
                        f"{overload} already decomposed by {_TABLE[overload].__qualname__}; "
                        f"refusing to replace it with {fn.__qualname__}"
                    )
                _TABLE[overload] = fn
        return fn

    return decorate


def decomposition_table(
    ops: Iterable[torch._ops.OpOverload | torch._ops.OpOverloadPacket] | None = None,
) -> dict[torch._ops.OpOverload, Callable]:
    """aten overload -> decomposition; all of them, or those of ``ops`` (overloads or packets).

    Raises ``KeyError`` naming an explicitly requested overload that has no decomposition
    (a packet only contributes the overloads that have one).
    """
    if ops is None:
        return dict(_TABLE)
    selected: dict[torch._ops.OpOverload, Callable] = {}
    for op in ops:
        if isinstance(op, torch._ops.OpOverloadPacket):
            selected.update({o: _TABLE[o] for o in _overloads(op) if o in _TABLE})
        elif op in _TABLE:
            selected[op] = _TABLE[op]
        else:
            raise KeyError(
                f"no decomposition for {op}; `decomposition_table()` lists the covered overloads"
            )
    return selected
