"""A memory-aware order of the kernel groups, taken when it lowers the peak.

The topological order keeps program order where it is free, so a branch the program
writes last runs last: a downsampling block's shortcut (a strided convolution of the block
input) runs after the whole main path, and the block input, which only the shortcut still
reads, stays alive through the main path's largest buffers (GhostNet at batch 512: 392 MB
held across a 2.3-GB peak). Here the groups are listed again greedily: of the groups whose
inputs are made, the one that adds the fewest live bytes (what it makes, less what it is
the last reader of) runs next, program order breaking ties. The new order is kept only
when its peak of live bytes is lower by MIN_GAIN or more, so the kernel order of a graph
whose memory it does not help stays as the program wrote it.

Dependencies are the producers of what a group reads, and, kept in program order, every
library call outside PURE_LIBRARY_KERNELS (one may draw from a generator, another may
write what it reads). A graph with an in-place library call or a collective keeps its
order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from ..lowering.collectives import is_collective
from .collectives import Draft, extern_of

#: library calls with no effect beyond their outputs, free to move
PURE_LIBRARY_KERNELS = frozenset({"convolution", "mm", "addmm", "bmm", "baddbmm"})
#: the new order is kept when its peak is at most this share of program order's
MIN_GAIN = 0.97
#: larger graphs keep their order (the greedy pass is quadratic in the ready set)
MAX_GROUPS = 4000


def _movable(drafts: Sequence[Draft]) -> bool:
    for draft in drafts:
        extern = extern_of(draft)
        if extern is not None and (extern.mutates is not None or is_collective(extern.kernel)):
            return False
    return True


def _predecessors(drafts: Sequence[Draft]) -> list[set[int]]:
    preds: list[set[int]] = [set() for _ in drafts]
    made_by: dict[str, int] = {}
    last_effect = None
    for i, draft in enumerate(drafts):
        preds[i].update(made_by[name] for name in draft.reads if name in made_by)
        extern = extern_of(draft)
        if extern is not None and extern.kernel_name not in PURE_LIBRARY_KERNELS:
            if last_effect is not None:
                preds[i].add(last_effect)
            last_effect = i
        for name in draft.writes:
            made_by.setdefault(name, i)
        preds[i].discard(i)
    return preds


class _Bytes:
    """Live bytes as groups run in some order: a buffer lives from the group making it to
    its last reader; graph outputs and held inputs stay."""

    def __init__(self, drafts: Sequence[Draft], size: Callable[[str], int], keep: set[str]):
        self.size = size
        # each group's figures once: the greedy pass asks for them at every step
        self._made = [sum(size(name) for name in d.writes) for d in drafts]
        self._inputs = [frozenset(d.reads - d.writes - keep) for d in drafts]

    def made(self, i: int) -> int:
        return self._made[i]

    def inputs(self, i: int) -> frozenset[str]:
        return self._inputs[i]

    def peak(self, order: Sequence[int]) -> int:
        last: dict[str, int] = {}
        for position, i in enumerate(order):
            for name in self.inputs(i):
                last[name] = position
        live = peak = 0
        for position, i in enumerate(order):
            live += self.made(i)
            peak = max(peak, live)
            live -= sum(self.size(name) for name in self.inputs(i) if last[name] == position)
        return peak


def _greedy(drafts: Sequence[Draft], preds: list[set[int]], counted: _Bytes) -> list[int]:
    waiting = [len(p) for p in preds]
    succs: list[list[int]] = [[] for _ in drafts]
    for i, p in enumerate(preds):
        for j in p:
            succs[j].append(i)
    readers: Counter[str] = Counter()
    for i in range(len(drafts)):
        readers.update(counted.inputs(i))
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []
    while ready:

        def added(i: int) -> int:
            freed = sum(counted.size(name) for name in counted.inputs(i) if readers[name] == 1)
            return counted.made(i) - freed

        best = min(ready, key=lambda i: (added(i), i))
        ready.remove(best)
        order.append(best)
        readers.subtract(counted.inputs(best))
        for j in succs[best]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.append(j)
    return order


def order_for_memory(
    drafts: list, size: Callable[[str], int], keep: set[str]
) -> tuple[list, int, int]:
    """``drafts`` (in a topological order) in the order that lowers their peak of live
    bytes, or as they are; with the peaks before and after. ``keep``: names alive
    throughout (graph inputs not released, constants, graph outputs)."""
    if len(drafts) < 3 or len(drafts) > MAX_GROUPS or not _movable(drafts):
        return drafts, 0, 0
    counted = _Bytes(drafts, size, keep)
    before = counted.peak(range(len(drafts)))
    order = _greedy(drafts, _predecessors(drafts), counted)
    if len(order) != len(drafts):  # a cycle cannot happen in a topological order; be safe
        return drafts, before, before
    after = counted.peak(order)
    if after > before * MIN_GAIN:
        return drafts, before, before
    return [drafts[i] for i in order], before, after
