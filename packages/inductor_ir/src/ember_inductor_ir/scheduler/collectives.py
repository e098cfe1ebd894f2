"""Collectives start as early and are waited for as late as their data allow.

A collective's extern kernel starts communication; its `wait_collective` kernel blocks
until it is over. Between them, kernels that neither feed the collective nor read its
result run while the data is in flight. After fusion and the topological order, each
collective moves up to just after the last group producing what it sends (never ahead
of an earlier collective: every rank issues them in the same order), and each wait moves
down to just before the first group reading its result or writing one of the buffers
the collective reads.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..extern import ExternKernel
from ..lowering.collectives import is_collective, wait_collective

log = logging.getLogger("ember.fusion")


class Draft(Protocol):
    ops: list
    reads: set[str]
    writes: set[str]


def extern_of(draft: Draft) -> ExternKernel | None:
    """The library call a group is, or None for a loop kernel."""
    first = draft.ops[0]
    return first if isinstance(first, ExternKernel) else None


def _is_start(draft: Draft) -> bool:
    extern = extern_of(draft)
    return extern is not None and is_collective(extern.kernel)


def _is_wait(draft: Draft) -> bool:
    extern = extern_of(draft)
    return extern is not None and extern.kernel is wait_collective


def _mutated(draft: Draft) -> set[str]:
    extern = extern_of(draft)
    return {extern.mutates} if extern is not None and extern.mutates else set()


def spread_collectives(drafts: list) -> list:
    """``drafts`` in topological order -> the same groups, collectives spread apart."""
    if not any(_is_start(d) or _is_wait(d) for d in drafts):
        return drafts
    order = list(drafts)
    last_start = -1
    for draft in [d for d in drafts if _is_start(d)]:
        order.remove(draft)
        producers = [i for i, other in enumerate(order) if other.writes & draft.reads]
        position = max([last_start, *producers]) + 1
        order.insert(position, draft)
        last_start = position
    for draft in [d for d in reversed(order) if _is_wait(d)]:
        order.remove(draft)
        readers = [
            i
            for i, other in enumerate(order)
            if other.reads & draft.writes or _mutated(other) & draft.reads
        ]
        order.insert(min(readers, default=len(order)), draft)
    log.info("collectives spread: %s", " ".join(d.ops[0].name for d in order))
    return order
