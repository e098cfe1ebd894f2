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
    """Every load that moves with the innermost reduction variable steps 1 in the innermost
    outer variable and not 1 in that reduction variable (and there is such a load)."""
    outer, red = group.index_vars()
    if not outer or not red:
        return False
    ranges = group.var_ranges()
    moving = 0
    for node in group.nodes:
        rw = ReadWriteHandler()
        node.run(rw)
        for _, raw in rw.reads:
            index = sympy.expand(simplify_index(raw, ranges))
            if not index.has(red[-1]):
                continue
            moving += 1
            if index.coeff(outer[-1]) != 1 or index.coeff(red[-1]) == 1:
                return False
    return moving > 0
