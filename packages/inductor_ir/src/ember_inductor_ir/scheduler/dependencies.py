"""Which buffers each operation reads, from its body's index expressions (or extern args)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..extern import ExternKernel
from ..handlers.readwrite import ReadWriteHandler
from ..indexing import index_vars
from ..nodes import ComputedBuffer

Operation = ComputedBuffer | ExternKernel


def op_name(op: Operation) -> str:
    return op.name


def reads_of(op: Operation) -> set[str]:
    if isinstance(op, ExternKernel):
        return {a.name for a in op.tensor_args()}
    rw = ReadWriteHandler()
    op.store_body(rw, index_vars("i", len(op.ranges)), index_vars("r", len(op.reduction_ranges)))
    return {name for name, _ in rw.reads}


def reads_memo() -> Callable[[Operation], frozenset[str]]:
    """``reads_of``, each operation's answer kept (operations hash by identity): for one
    ``schedule``, whose dead-code pass and fusion ask again and again, while no body
    changes."""
    return functools.cache(lambda op: frozenset(reads_of(op)))


def writes_of(op: Operation) -> list[str]:
    if isinstance(op, ExternKernel):
        return [o.name for o in op.outputs]
    return [op.name]
