"""A loops group's nodes in the order its code generators emit them: as few passes over the
reduction row as the nodes' dependences allow.

A generator runs consecutive ``outer`` nodes once per outer point and consecutive
``reduction``/``full`` nodes in one pass over the row, starting a new pass where a node reads
a reduction the current pass is still computing. Program order can interleave them needlessly:
a statistic stored by the kernel that reduces it (a batch norm's mean, divided in its
reduction's kernel) sits between that reduction and the next one over the same row, and would
cut one pass in two, each reading the whole row again (ResNet-50's batch-norm backward
kernels ran 4 ms a step slower on the H200). This order is decided before the memory plan,
whose in-place writes rely on the order nodes are emitted in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .kernel_group import ScheduledNode

#: (name, index) pairs a node's body reads and writes
Accesses = tuple[Sequence[tuple[str, object]], Sequence[tuple[str, object]]]


def _pass_kind(node: ScheduledNode) -> str:
    return "outer" if node.placement == "outer" else "loop"


def in_pass_order(
    nodes: list[ScheduledNode], accesses: Callable[[ScheduledNode], Accesses]
) -> list[ScheduledNode]:
    """``nodes`` (in program order) regrouped pass by pass: each pass takes, in order, every
    node of its kind that depends on no node left for a later pass (a read, write or
    overwrite of a buffer that node writes or reads); a row node reading a reduction of the
    current pass waits for the next one. A group without a reduction is left as it is."""
    if all(node.placement == "outer" for node in nodes):
        return nodes
    names = {}
    for node in nodes:
        reads, writes = accesses(node)
        names[id(node)] = ({n for n, _ in reads}, {n for n, _ in writes})
    ordered: list[ScheduledNode] = []
    remaining = nodes
    while remaining:
        kind = _pass_kind(remaining[0])
        reduced: set[str] = set()
        left: list[ScheduledNode] = []
        left_reads: set[str] = set()
        left_writes: set[str] = set()
        for node in remaining:
            reads, writes = names[id(node)]
            if (
                _pass_kind(node) != kind
                or reads & (left_writes | reduced)
                or writes & (left_reads | left_writes)
            ):
                left.append(node)
                left_reads |= reads
                left_writes |= writes
                continue
            ordered.append(node)
            if node.placement == "reduction":
                reduced |= writes
        remaining = left
    return ordered
