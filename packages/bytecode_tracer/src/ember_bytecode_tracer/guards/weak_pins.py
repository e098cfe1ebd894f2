"""Objects a guard pins by identity (ID_MATCH) or exact type (TYPE_MATCH), held weakly
where they can die before the code they guard.

A cache entry lives as long as its code object, which for a method of a class made in a
function, or for a module's `forward`, is usually far longer than the objects it was
compiled for. Holding those strongly would keep a model the user dropped (and everything
its class's closures hold) alive forever. torch.compile frees them; so must Ember.

`may_die(obj)` picks the objects held weakly: classes and functions made in a function
(`<locals>` in their qualified name), nn.Module instances and tensors (parameters).
Classes, functions and modules that live at module level stay strong: they live as long
as the program, and a strong check is cheaper. A guard whose object died reads `DEAD`,
an object no value is and no value's type is, so the guard fails and the entry is never
reused for a new object that took the dead one's id.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

import torch


class _Dead:
    """What a weakly pinned object reads as once it died: matches nothing."""

    def __init__(self) -> None:  # named like a class, for the texts that describe guards
        self.__module__ = "ember"
        self.__qualname__ = self.__name__ = "<freed since the trace>"

    def __repr__(self) -> str:
        return "<object freed since the trace>"


DEAD = _Dead()


def may_die(obj: Any) -> bool:
    """Whether a guard should pin `obj` weakly (see the module doc)."""
    if isinstance(obj, type | types.FunctionType):
        return "<locals>" in getattr(obj, "__qualname__", "")
    return isinstance(obj, torch.nn.Module | torch.Tensor)


def pin(obj: Any) -> Any:
    """What a guard stores for `obj`: a weak reference where `may_die`, else `obj`."""
    if may_die(obj):
        try:
            return weakref.ref(obj)
        except TypeError:  # a class without weak reference support
            return obj
    return obj


def unpin(held: Any) -> Any:
    """The object `pin` stored (DEAD once a weakly held one died)."""
    if type(held) is weakref.ref:
        obj = held()
        return DEAD if obj is None else obj
    return held


def is_weak(held: Any) -> bool:
    return type(held) is weakref.ref


def is_ref_of(value: Any, ref: weakref.ref) -> bool:
    """`value is ref()` (a dead ref matches nothing)."""
    return value is ref()


def type_is_ref_of(value: Any, ref: weakref.ref) -> bool:
    """`type(value) is ref()` (a dead ref matches nothing)."""
    return type(value) is ref()
