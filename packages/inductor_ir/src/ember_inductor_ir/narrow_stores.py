"""Narrow stores: a float32 buffer whose every value is exactly a bfloat16 (or float16)
value is stored as that dtype, and every read widens it back.

Autocast graphs round to bfloat16 and widen again (``x.to(bf16).to(float32)``) before a
value is kept for later kernels: stored as float32 it costs twice the bytes written and
read, for the same numbers. A buffer is narrowed when its body's stored value is provably
exact in the narrow dtype (handlers/exactness.py) and only loop kernels read it: the
store rounds to the narrow dtype (exact), each load widens (exact), so results are bit for
bit the same. Not narrowed: graph outputs, buffers an extern kernel reads or writes (a
library gets the tensor as it is), donations, inputs, constants and reductions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from .extern import ExternKernel
from .handlers.exactness import NARROW_FLOATS, Exact, ExactnessHandler, tensor_exactness
from .indexing import index_vars
from .nodes import Buffer, ComputedBuffer, ConstantBuffer, Pointwise

if TYPE_CHECKING:
    from .graph import GraphLowering

log = logging.getLogger("ember.ir")

#: the buffer dtypes whose stores may narrow
WIDE_FLOATS = frozenset({torch.float32})
#: constants up to this many elements are checked for narrow values
SCANNED_CONSTANT_NUMEL = 1 << 16


@dataclass(frozen=True)
class Narrowed:
    """One narrowed buffer: its name, the dtype now stored, the bytes saved per write."""

    name: str
    dtype: torch.dtype
    saved_bytes: int


def pinned_buffers(lowering: GraphLowering) -> set[str]:
    """Buffers whose storage someone other than a loop kernel sees as it is: graph outputs,
    extern kernels' arguments and in-place targets, donations both ways."""
    pinned = {spec.name for spec in lowering.graph_outputs if spec.name is not None}
    pinned |= set(lowering.donations) | set(lowering.donations.values())
    for op in lowering.operations:
        if isinstance(op, ExternKernel):
            pinned |= {arg.name for arg in op.tensor_args()}
            if op.mutates is not None:
                pinned.add(op.mutates)
    return pinned


def known_exactness(buffers: dict[str, Buffer]) -> dict[str, Exact]:
    """The narrow dtypes that hold every element of a small float constant (a mask's zeros;
    a large one, a weight baked into the graph, is not scanned)."""
    return {
        name: tensor_exactness(buf.value)
        for name, buf in buffers.items()
        if isinstance(buf, ConstantBuffer)
        and buf.value is not None
        and buf.value.numel() <= SCANNED_CONSTANT_NUMEL
    }


def exact_dtype(
    buf: ComputedBuffer, storage: dict[str, torch.dtype], known: dict[str, Exact]
) -> torch.dtype | None:
    """The narrow dtype every value ``buf`` stores is exactly a value of (None if unproven):
    ``storage`` gives each buffer's storage dtype, ``known`` what constants are exact in."""
    handler = ExactnessHandler(storage, known)
    buf.store_body(handler, index_vars("i", len(buf.ranges)))
    exact = handler.stored[buf.name][1] if buf.name in handler.stored else frozenset()
    return next((d for d in NARROW_FLOATS if d in exact), None)


def narrow_stores(lowering: GraphLowering) -> list[Narrowed]:
    """Narrow what may be narrowed, in program order (a buffer computed from a narrowed one
    sees its narrow storage); returns what was narrowed."""
    pinned = pinned_buffers(lowering)
    known = known_exactness(lowering.buffers)
    storage = {name: b.layout.dtype for name, b in lowering.buffers.items()}
    done: list[Narrowed] = []
    for op in lowering.operations:
        if not _candidate(op, pinned):
            continue
        dtype = exact_dtype(op, storage, known)
        if dtype is None:
            continue
        numel = op.layout.storage_numel()
        wide = op.layout.dtype
        op.widen_to, op.layout = wide, replace(op.layout, dtype=dtype)
        storage[op.name] = dtype
        saved = numel * (wide.itemsize - dtype.itemsize) if isinstance(numel, int) else 0
        done.append(Narrowed(op.name, dtype, saved))
    if done:
        log.info(
            "narrowed %d float32 buffers to bfloat16/float16 storage (%d bytes less): %s",
            len(done),
            sum(n.saved_bytes for n in done),
            ", ".join(n.name for n in done),
        )
    lowering.narrowed = done
    return done


def _candidate(op: object, pinned: set[str]) -> bool:
    return (
        type(op) is ComputedBuffer
        and isinstance(op.data, Pointwise)
        and op.widen_to is None
        and op.layout.dtype in WIDE_FLOATS
        and op.name not in pinned
    )


__all__ = ["Narrowed", "exact_dtype", "known_exactness", "narrow_stores", "pinned_buffers"]
