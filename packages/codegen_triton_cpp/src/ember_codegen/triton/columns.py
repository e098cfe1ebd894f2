"""Column reductions: reduce over a strided dimension while the kept one is contiguous.

Batch-norm statistics of channels-last (NHWC) data reduce each channel over N, H, W: the
reduction walks one channel at stride C, and the contiguous dimension is the kept one. With
one output point per program (XBLOCK = 1) every load of a row is its own memory sector; a
split reduction whose programs each take XBLOCK neighbouring output points over a chunk of
the row loads whole rows of the [rows, C] tile instead (coalesced along the kept dimension),
and the split's parts keep enough programs busy when C is small.
"""

from __future__ import annotations

import sympy

from ember_inductor_ir import KernelGroup, ReadWriteHandler
from ember_inductor_ir.indexing import simplify_index


def is_column_reduction(group: KernelGroup) -> bool:
    """Whether most loads that move with the innermost reduction variable step 1 in the
    innermost outer variable (and not 1 in that reduction variable). Loads that move with the
    row alone (a per-pixel mean or rstd of a layer norm's backward, broadcast over the kept
    dimension) load one run per tile whatever the tiling: they count for neither side."""
    outer, red = group.index_vars()
    if not outer or not red:
        return False
    ranges = group.var_ranges()
    columns = rows = 0
    for node in group.nodes:
        rw = ReadWriteHandler()
        node.run(rw)
        for _, raw in rw.reads:
            index = sympy.expand(simplify_index(raw, ranges))
            if not index.has(red[-1]) or not index.has(*outer):
                continue
            if index.coeff(outer[-1]) == 1 and index.coeff(red[-1]) != 1:
                columns += 1
            else:
                rows += 1
    return columns > 0 and columns >= rows
