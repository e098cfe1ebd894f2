"""Adjacent reduction dimensions that every access walks as one run merge into one loop.

A batch-norm statistic over an NCHW [16, 128, 16, 16] buffer reduces (n, h, w): per
channel the (h, w) plane is 256 contiguous elements, but as two loops of 16 the innermost
one is too short for the lane loop (lanes.py: MIN_EXTENT) and the kernel ran scalar, a
latency-bound chain of double additions (2.9 ms a step for one such kernel in the cnn's
backward). Merged, the loop over the plane is one run of 256 and takes the lanes.

Merging r_j (size a) and r_k = r_{j+1} (size b) into one variable ``m`` of size a*b
substitutes r_j = m // b and r_k = m % b in every node's index expressions: the loops visit
the same points in the same order (a scalar reduction adds in the same order; the flat
reduction index argmax reports is unchanged). It is done only when every load, store and
index expression of the group then simplifies to one without a division or modulo of
``m`` (each access walks the two dimensions as one contiguous run, or does not move with
them), so no access pays for the merge.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy

from ember_inductor_ir import KernelGroup, ReadWriteHandler, ScheduledNode
from ember_inductor_ir.indexing import FloorDiv, ModularIndexing, simplify_index


class _IndexRecorder(ReadWriteHandler):
    """Reads and writes, plus the index expressions a body turns into values."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[sympy.Expr] = []

    def index_expr(self, expr: sympy.Expr, dtype: Any) -> None:
        self.op_count += 1
        self.values.append(expr)


def _divides(expr: sympy.Expr, var: sympy.Symbol) -> bool:
    """Whether ``var`` appears under a FloorDiv or ModularIndexing in ``expr``."""
    return any(
        node.has(var)
        for node in sympy.preorder_traversal(expr)
        if isinstance(node, (FloorDiv, ModularIndexing))
    )


def _merge_last_two(group: KernelGroup) -> KernelGroup | None:
    sizes = group.reduction_sizes
    if len(sizes) < 2 or not all(isinstance(s, (int, sympy.Integer)) for s in sizes[-2:]):
        return None
    outer, red = group.index_vars()
    j, k = red[-2], red[-1]
    inner = sympy.Integer(int(sizes[-1]))
    merged_sizes = [*sizes[:-2], sympy.Integer(int(sizes[-2]) * int(sizes[-1]))]
    substitution = {j: FloorDiv(j, inner), k: ModularIndexing(j, sympy.Integer(1), inner)}
    ranges = dict(zip([*outer, *red[:-1]], [*group.sizes, *merged_sizes], strict=True))
    nodes = []
    for node in group.nodes:
        # a ``full`` node's point index names reduction variables too
        index, rindex = (
            [sympy.sympify(e).xreplace(substitution) for e in exprs]
            for exprs in (node.index, node.rindex)
        )
        moved = ScheduledNode(node.buffer, node.placement, index, rindex)
        recorder = _IndexRecorder()
        moved.run(recorder)
        accesses = [*recorder.reads, *recorder.writes, *(("", v) for v in recorder.values)]
        # an access that divides the merged variable (a pooling window, rows of a wider
        # buffer) keeps the two loops
        if any(_divides(simplify_index(expr, ranges), j) for _, expr in accesses):
            return None
        nodes.append(moved)
    return dataclasses.replace(group, reduction_sizes=merged_sizes, nodes=nodes)


def merge_reduction_dims(group: KernelGroup) -> KernelGroup:
    """``group`` with its innermost static reduction dimensions merged while every access
    walks them as one run; the group itself when nothing merges."""
    if group.is_extern:
        return group
    while (merged := _merge_last_two(group)) is not None:
        group = merged
    return group
