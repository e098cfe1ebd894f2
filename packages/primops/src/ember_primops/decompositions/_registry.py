"""The table itself: aten overload -> decomposition, filled by `register_decomposition`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

import torch

log = logging.getLogger("ember.decompositions")

_TABLE: dict[torch._ops.OpOverload, Callable] = {}
#: rows whose decomposition draws from the run-time seed (prims.next_seed), not torch's generator
_RANDOM: set[torch._ops.OpOverload] = set()

F = TypeVar("F", bound=Callable)


class DuplicateDecomposition(RuntimeError):
    """Two decompositions were registered for the same aten overload."""


def _overloads(op: torch._ops.OpOverload | torch._ops.OpOverloadPacket):
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    raise TypeError(f"expected an aten OpOverload or OpOverloadPacket, got {op!r}")


def register_decomposition(
    *ops: torch._ops.OpOverload, draws_random: bool = False
) -> Callable[[F], F]:
    """Register the decorated function as the decomposition of each given overload.

    The function receives the overload's arguments exactly as aten does (positional and
    keyword) and returns what the aten op returns, computed with prims and other aten ops
    (which decompose recursively). ``draws_random`` marks a decomposition that draws its
    numbers from ``prims.next_seed`` (a stream other than torch's generator).
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
                if draws_random:
                    _RANDOM.add(overload)
        return fn

    return decorate


def decomposition_table(
    ops: Iterable[torch._ops.OpOverload | torch._ops.OpOverloadPacket] | None = None,
    *,
    random: bool = True,
) -> dict[torch._ops.OpOverload, Callable]:
    """aten overload -> decomposition; all of them, or those of ``ops`` (overloads or packets).

    ``random=False`` leaves out the random ops (rand, randn, bernoulli, native_dropout,
    normal, uniform, ...): a tracer then keeps them as aten ops that draw from torch's
    generator, so a graph run under ``torch.manual_seed(k)`` gives eager's values and leaves
    the generator where eager does. Their decompositions draw from ``prims.next_seed``
    instead (same distributions, another stream), which generated kernels need.

    Raises ``KeyError`` naming an explicitly requested overload that has no decomposition
    (a packet only contributes the overloads that have one).
    """
    table = _TABLE if random else {op: fn for op, fn in _TABLE.items() if op not in _RANDOM}
    if ops is None:
        return dict(table)
    selected: dict[torch._ops.OpOverload, Callable] = {}
    for op in ops:
        if isinstance(op, torch._ops.OpOverloadPacket):
            selected.update({o: table[o] for o in _overloads(op) if o in table})
        elif op in table:
            selected[op] = table[op]
        else:
            raise KeyError(
                f"no decomposition for {op}; `decomposition_table()` lists the covered overloads"
            )
    return selected
