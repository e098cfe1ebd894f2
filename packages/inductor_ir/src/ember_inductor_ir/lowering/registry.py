"""The lowering table: prim name -> function building loop IR, filled by decorators.

A lowering is ``fn(ctx, *args, **kwargs)`` where ``ctx`` is the :class:`GraphLowering` being
built (for realizing buffers and creating extern kernels), tensor arguments are
:class:`~ember_inductor_ir.nodes.TensorBox` values and everything else is passed as in the
FX node. It returns a TensorBox or a tuple of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

PRIM_NAMESPACE = "ember_prims"

Lowering = Callable[..., Any]
LOWERINGS: dict[str, Lowering] = {}


def prim_name(op: object) -> str:
    """The registry key of a prim: its bare name (``add``), from a name or an OpOverload."""
    if isinstance(op, str):
        return op.removeprefix(f"{PRIM_NAMESPACE}::").removeprefix(f"{PRIM_NAMESPACE}.")
    if isinstance(op, torch._ops.OpOverload):
        namespace, _, rest = op.name().partition("::")
        base = rest.split(".")[0]
        return base if namespace == PRIM_NAMESPACE else f"{namespace}::{base}"
    if isinstance(op, torch._ops.OpOverloadPacket):
        namespace, _, rest = op._qualified_op_name.partition("::")
        return rest if namespace == PRIM_NAMESPACE else f"{namespace}::{rest}"
    raise TypeError(f"cannot register a lowering for {op!r}: pass a prim or its name")


def register_lowering(*prims: object) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of each given prim (or name)."""

    def decorate(fn: Lowering) -> Lowering:
        for prim in prims:
            key = prim_name(prim)
            if key in LOWERINGS:
                raise ValueError(f"prim {key!r} already has a lowering")
            LOWERINGS[key] = fn
        return fn

    return decorate


def lowering_for(op: object) -> Lowering | None:
    try:
        return LOWERINGS.get(prim_name(op))
    except TypeError:
        return None
