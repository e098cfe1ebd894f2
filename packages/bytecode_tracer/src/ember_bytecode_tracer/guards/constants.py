"""The constants EQUALS_MATCH accepts, and the type-strict equality it guards with.

Python's `==` says `1 == True == 1.0` and `(1, 2) == torch.Size([1, 2])`, but a trace that
saw an int may have taken a different path than one that sees a bool, so equality here
also requires the same type at every level. NaN equals NaN and -0.0 differs from 0.0,
so that a guard on a constant a trace actually saw can pass again.
"""

from __future__ import annotations

import math
from typing import Any

import torch

SCALAR_TYPES: tuple[type, ...] = (
    int,
    float,
    bool,
    complex,
    str,
    bytes,
    type(None),
    type(Ellipsis),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)
CONTAINER_TYPES: tuple[type, ...] = (tuple, frozenset, torch.Size, slice)


def check_constant(value: Any) -> None:
    """Raise TypeError unless `value` is an immutable constant EQUALS_MATCH can compare."""
    kind = type(value)
    if kind in SCALAR_TYPES:
        return
    if kind is slice:
        for part in (value.start, value.stop, value.step):
            check_constant(part)
        return
    if kind in CONTAINER_TYPES:
        for item in value:
            check_constant(item)
        return
    raise TypeError(
        f"EQUALS_MATCH needs an immutable constant (int, float, bool, str, bytes, None, "
        f"torch.dtype/device/Size, or a tuple/frozenset of those), got {kind.__name__}; "
        f"guard mutable values with LEN_MATCH/DICT_KEYS plus guards on their items, "
        f"and other objects with ID_MATCH or TYPE_MATCH"
    )


def typed_key(value: Any) -> Any:
    """A hashable key that is equal for two constants exactly when strict_equal says so."""
    kind = type(value)
    if kind is float:
        if math.isnan(value):
            return (float, "nan")
        return (float, value, math.copysign(1.0, value))
    if kind is complex:
        return (complex, typed_key(value.real), typed_key(value.imag))
    if kind is slice:
        return (slice, typed_key(value.start), typed_key(value.stop), typed_key(value.step))
    if kind is frozenset:
        return (frozenset, frozenset(typed_key(v) for v in value))
    if kind in (tuple, torch.Size):
        return (kind, tuple(typed_key(v) for v in value))
    return (kind, value)


def strict_equal(value: Any, expected: Any) -> bool:
    """`value == expected` with the same type at every level (the slow, general form)."""
    if type(value) is not type(expected):
        return False
    try:
        return typed_key(value) == typed_key(expected)
    except TypeError:  # an unhashable item inside a value of the right container type
        return False


def needs_slow_equal(value: Any) -> bool:
    """Whether plain `type(v) is T and v == value` could accept a different constant."""
    kind = type(value)
    if kind is float:
        return math.isnan(value) or value == 0.0
    if kind in (complex, slice, frozenset):
        return True
    if kind is torch.Size:  # items are always ints
        return False
    if kind is tuple:
        return any(needs_slow_equal(v) or type(v) in CONTAINER_TYPES for v in value)
    return False
