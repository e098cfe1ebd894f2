"""Combined launches: runs of small, independent loops groups that a code generator may
launch as one kernel.

An optimizer step is hundreds of one-parameter pointwise kernels, each launched on its own:
on a GPU each launch costs a few microseconds of device time and more of the host's, often
more than the kernel's work. ``combine_runs`` picks the runs a generator may emit as ONE
kernel whose programs are split among the groups by program-id ranges (each keeping its
own sizes and index math): groups adjacent in the schedule, each pointwise and small (the
target's :class:`CombinePolicy`, a field of its capability record), and independent (no
group of a run reads or writes storage another writes: the programs of one launch run in
no order). Deciding a run changes no group: the generator still emits each one's body.

What the memory plan frees after a group of a run is freed after the run's launch (the
generator defers it): a few small kernels later. A run used to end at such a group, which
cut every run of a backward that releases its inputs at their last reader (each weight's
bf16 cast is its weight's last reader). The storage a free hands on cannot be reused within
the run: a group writing storage that another group of the run reads ends the run (below).

Storage, not names, decides independence: the memory plan gives a buffer the storage of a
dead one (or writes it in place over a buffer its own kernel reads), so a group's output may
be the very storage another group of the run reads. Such a pair ends the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .kernel_group import KernelGroup, Schedule

log = logging.getLogger("ember.fusion")


@dataclass(frozen=True)
class CombinePolicy:
    """When a target launches several small loops groups as one kernel."""

    #: most groups in one launch (the dispatch is a chain of program-id comparisons)
    max_kernels: int = 8
    #: most distinct buffer arguments of one launch (a launch's argument list has a cost,
    #: and a kernel's parameter space a limit)
    max_args: int = 64
    #: a group of more points than this runs on its own (its launch no longer dominates)
    max_numel: int = 1 << 20


def _static_numel(group: KernelGroup) -> int | None:
    numel = 1
    for size in group.sizes:
        if not isinstance(size, int) and not getattr(size, "is_Integer", False):
            return None
        numel *= int(size)
    return numel


def combinable(group: KernelGroup, policy: CombinePolicy) -> str | None:
    """None when ``group`` may be part of a combined launch; otherwise why not."""
    if group.extern is not None:
        return "a library call"
    if group.reduction_sizes:
        return "a reduction"
    numel = _static_numel(group)
    if numel is None:
        return "symbolic sizes"
    if numel == 0:
        return "no points"
    if numel > policy.max_numel:
        return f"{numel} points, more than {policy.max_numel}"
    return None


class _Storages:
    """Each buffer's storage: the buffer whose storage the memory plan gives it, followed
    to the end of the chain of reuses."""

    def __init__(self, sched: Schedule) -> None:
        self.sched = sched

    def root(self, name: str) -> str:
        seen = set()
        while name not in seen:
            seen.add(name)
            plan = self.sched.allocations.get(name)
            if plan is None or plan.reuses is None:
                return name
            name = plan.reuses
        return name

    def of(self, names: set[str]) -> set[str]:
        return {self.root(n) for n in names}


@dataclass
class _Run:
    groups: list[KernelGroup]
    reads: set[str]  # storages the run's groups read
    writes: set[str]  # storages they write
    args: set[str]  # buffer names they take


def _touches(group: KernelGroup) -> tuple[set[str], set[str]]:
    written = set(group.buffer_names())
    return set(group.reads) - written, written


#: the most groups a small kernel reading only graph inputs moves up over (gather_input_reads)
GATHER_SPAN = 4


def gather_input_reads(
    groups: list[KernelGroup], inputs: set[str], policy: CombinePolicy | None
) -> list[KernelGroup]:
    """Small pointwise groups that read only graph inputs (autocast's weight casts, each just
    before its matmul) moved up to the previous such group, over at most GATHER_SPAN groups
    none of which writes what it reads, so that they run adjacent and ``combine_runs`` can
    launch them as one kernel: Llama's q, k and v weight casts were three launches, each
    before its own matmul. Their outputs live a few groups longer (the casts of one layer)."""
    if policy is None or policy.max_kernels < 2:
        return groups
    out: list[KernelGroup] = []
    last_gathered = -1  # the index in ``out`` of the last group that reads only inputs
    for group in groups:
        movable = combinable(group, policy) is None and group.reads and group.reads <= inputs
        if not movable:
            out.append(group)
            continue
        between = out[last_gathered + 1 :] if last_gathered >= 0 else None
        if (
            between is not None
            and 0 < len(between) <= GATHER_SPAN
            and not any(group.reads & set(g.buffer_names()) for g in between)
        ):
            out.insert(last_gathered + 1, group)
            last_gathered += 1
        else:
            out.append(group)
            last_gathered = len(out) - 1
    return out


def combine_runs(
    sched: Schedule,
    policy: CombinePolicy | None,
    eligible: Callable[[KernelGroup], str | None] = lambda g: None,
) -> list[list[KernelGroup]]:
    """The runs (two groups or more, in schedule order) to launch as one kernel each.
    ``eligible``: the generator's own refusal of a group (say, one that became two kernels),
    None to accept."""
    if policy is None or policy.max_kernels < 2:
        return []
    storages = _Storages(sched)
    runs: list[list[KernelGroup]] = []
    current: _Run | None = None

    def close() -> None:
        if current is not None and len(current.groups) > 1:
            runs.append(current.groups)

    for group in sched:
        reason = combinable(group, policy) or eligible(group)
        if reason is not None:
            close()
            current = None
            continue
        reads, writes = _touches(group)
        r, w = storages.of(reads), storages.of(writes)
        args = reads | writes
        refusal = None if current is None else _joins(current, r, w, args, policy)
        if current is not None and refusal is None:
            current.groups.append(group)
            current.reads |= r
            current.writes |= w
            current.args |= args
        else:
            if current is not None:
                log.info("combined launch ends before %s: %s", group.name, refusal)
                close()
            current = _Run([group], set(r), set(w), set(args))
    close()
    for run in runs:
        log.info("one launch for %s", ", ".join(g.name for g in run))
    return runs


def _joins(run: _Run, reads: set[str], writes: set[str], args: set[str], policy) -> str | None:
    """None when a group touching these storages may join ``run``; otherwise why not."""
    if len(run.groups) >= policy.max_kernels:
        return f"{policy.max_kernels} kernels already"
    if len(run.args | args) > policy.max_args:
        return f"more than {policy.max_args} arguments"
    if reads & run.writes:
        return f"reads {sorted(reads & run.writes)[0]}, written in the run"
    if writes & (run.reads | run.writes):
        return f"writes {sorted(writes & (run.reads | run.writes))[0]}, used in the run"
    return None


__all__ = ["CombinePolicy", "combinable", "combine_runs", "gather_input_reads"]
