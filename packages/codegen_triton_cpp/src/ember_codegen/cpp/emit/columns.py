"""Column reductions: reduce over a strided dimension, keep the contiguous one as lanes.

A bias gradient sums a [rows, cols] buffer over rows: per output point the reduction walks
a column (stride ``cols``), which neither vectorizes nor uses whole cache lines (measured
16x slower than eager on 512x3072). When every read that moves with the innermost
reduction variable is contiguous in the innermost *outer* variable instead, the kernel
runs ``LANES`` neighbouring output points together: the lanes are output points, the
reduction loops run once per block of them, and each point finishes from its lane.
"""

from __future__ import annotations

import sympy
import torch

from ember_inductor_ir import ReadWriteHandler, ScheduledNode
from ember_inductor_ir.indexing import simplify_index

from .lanes import LANES, LaneAcc

#: lane forms whose per-lane update is exact in any lane order (each lane is one output
#: point: a sum still adds its values in the reduction's order)
COLUMN_FORMS = {"sum", "sum_f64", "max", "min"}


def _coefficient(index: sympy.Expr, var: sympy.Symbol) -> sympy.Expr:
    return sympy.expand(index).coeff(var)


def columns_apply(
    nodes: list[ScheduledNode],
    outer_var: sympy.Symbol,
    outer_size: int,
    red_var: sympy.Symbol,
    accs: list[LaneAcc],
    dtypes: list[tuple[torch.dtype, torch.dtype]],
    one_loop_segment_first: bool,
    ranges: dict[sympy.Symbol, sympy.Expr],
) -> bool:
    """Whether the group's only loop segment is a column reduction worth running in lanes."""
    if not one_loop_segment_first or outer_size < 2 * LANES or not accs:
        return False
    if any(a.form not in COLUMN_FORMS for a in accs):
        return False
    moving = 0
    for node in nodes:
        if node.placement != "reduction":
            return False  # a value stored per reduction element: keep the plain form
        rw = ReadWriteHandler()
        node.run(rw)
        for _, raw in rw.reads:
            index = simplify_index(raw, ranges)  # drop the whole digits: plain strides
            if not index.has(red_var):
                continue
            moving += 1
            if _coefficient(index, outer_var) != 1 or _coefficient(index, red_var) == 1:
                return False
    return moving > 0
