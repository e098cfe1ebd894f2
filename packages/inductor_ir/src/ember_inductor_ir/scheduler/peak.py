"""The memory a schedule's wrapper holds at most: its plan replayed group by group.

The wrapper allocates each group's buffers before the group runs (a computed buffer fresh or
in a dead buffer's storage, an in-place one in the storage of a buffer the group reads last, a
library call's results fresh from the library), then drops the buffers the plan frees after
it; a freed storage that a later buffer takes over is held until then (the wrapper keeps it
for its taker). An in-place library call's result is the buffer it wrote, no storage of its
own. Counted: the storages the graph makes (outputs among them), with their sizes
on the example inputs; not counted: graph inputs and constants, a library's workspaces,
a group's values kept in registers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..nodes import Buffer
    from .kernel_group import Allocation, KernelGroup


def plan_peak_bytes(
    groups: Sequence[KernelGroup],
    buffers: Mapping[str, Buffer],
    allocations: Mapping[str, Allocation],
    frees: Mapping[str, list[str]],
    nbytes: Callable[[Buffer], int],
    at_peak: dict[str, int] | None = None,
    unstored: Set[str] = frozenset(),
) -> int:
    """The most bytes of storage the plan holds at once (see the module docstring); with
    ``at_peak``, that dict is filled with the storages then held (each buffer named by the
    first that took it) and their bytes, and ``at_peak[""]`` is the peak group's index.
    ``unstored``: internal full-row buffers a code generator kept in registers (its own
    choice, unknown to the schedule), not counted either."""
    taken = {a.reuses for a in allocations.values() if a.reuses is not None and not a.in_place}
    storage_of: dict[str, str] = {}  # buffer alive (or held for its taker) -> its storage
    size: dict[str, int] = {}  # storage -> bytes
    peak = 0
    for index, group in enumerate(groups):
        # an in-place library call (index_put_, a collective) returns the buffer it writes
        aliased = group.extern.mutates if group.extern is not None else None
        in_registers = group.register_only() | unstored if group.extern is None else set()
        for name in group.buffer_names():
            if name in in_registers:  # never stored (LeViT's stem counted 784 MB twice)
                continue
            plan = allocations.get(name)
            donor = plan.reuses if plan is not None else None
            if aliased is not None and name != aliased:
                if aliased in storage_of:  # (a graph input's storage: uncounted)
                    storage_of[name] = storage_of[aliased]
            elif donor is not None and donor in storage_of:
                storage = storage_of[donor] if plan.in_place else storage_of.pop(donor)
                storage_of[name] = storage
            elif plan is None or not plan.in_place:  # (in place in a graph input: uncounted)
                storage_of[name] = name
                size[name] = nbytes(buffers[name])
        held = set(storage_of.values())
        total = sum(size[s] for s in held)
        if total > peak and at_peak is not None:
            at_peak.clear()
            at_peak.update({s: size[s] for s in held}, **{"": index})
        peak = max(peak, total)
        for name in frees.get(group.name, ()):
            if name not in taken:
                storage_of.pop(name, None)
    return peak


def live_bytes_bound(
    groups: Sequence[KernelGroup],
    buffers: Mapping[str, Buffer],
    keep: set[str],
    nbytes: Callable[[Buffer], int],
) -> int:
    """What a plan without in-place writes holds at least: the most bytes of buffers alive
    at once, each from the group making it to its last reader (graph outputs to the end),
    with storages handed on at once and of any size."""
    made: dict[str, int] = {}
    last: dict[str, int] = {}
    for k, group in enumerate(groups):
        for name in group.buffer_names():
            made.setdefault(name, k)
        for name in group.reads | set(group.buffer_names()):
            last[name] = k
    end = len(groups)
    change = [0] * (end + 2)  # bytes born at a group, and freed after the next one
    for name, at in made.items():
        size = nbytes(buffers[name])
        change[at] += size
        change[(end if name in keep else last.get(name, at)) + 1] -= size
    peak = alive = 0
    for k in range(end):
        alive += change[k]
        peak = max(peak, alive)
    return peak
