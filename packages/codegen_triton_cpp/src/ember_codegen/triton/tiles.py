"""Transposing pointwise kernels: two-dimensional tiles where accesses disagree on the grain.

A pointwise kernel runs its loops flattened, one block of XBLOCK neighbouring points per
program, so an access that is contiguous in the innermost loop variable loads whole memory
sectors while one that steps 1 in another variable (it reads a transposed view: gMLP's
`u * v.transpose(-1, -2)`, a layout change between NCHW and channels-last) loads one element
per sector. Such a kernel runs over [XBLOCK, RBLOCK] tiles instead: the tile's first axis
walks the flattened loops other than that variable (the innermost one last), its second
axis walks that variable, and Triton gives each access a layout along its own grain. No
reduction happens over the second axis; it only shapes the tile.
"""

from __future__ import annotations

import collections

import sympy

from ember_inductor_ir import KernelGroup, ReadWriteHandler
from ember_inductor_ir.indexing import simplify_index

#: both the innermost variable and the transposed one must span at least this many points
#: (8 bfloat16 are one 16-byte load; CoaT's heads of 8 channels read across the grain
#: loaded one element per instruction)
MIN_TILE_EXTENT = 8
#: a kernel over fewer points is left one-dimensional (the launch dominates)
MIN_TILED_POINTS = 1 << 16


def transposed_var(group: KernelGroup) -> int | None:
    """The position among the group's loop variables of the one its transposed accesses step
    1 in, where a pointwise group has such accesses (None: run it one-dimensional).

    An access is along the grain when its index steps 1 in the innermost variable of size >
    1, transposed when it steps otherwise there but steps 1 in another variable; accesses
    that do not move with the innermost variable (a per-row bias) count for neither, nor do
    indices a view left in quotients and remainders (their steps are not one number)."""
    if group.reduction_sizes or len(group.sizes) < 2:
        return None
    if not all(isinstance(n, int | sympy.Integer) for n in group.sizes):
        return None
    sizes = [int(n) for n in group.sizes]
    if sympy.prod(sizes) < MIN_TILED_POINTS:
        return None
    variables, _ = group.index_vars()
    inner = max((k for k, n in enumerate(sizes) if n > 1), default=None)
    if inner is None or sizes[inner] < MIN_TILE_EXTENT:
        return None
    ranges = group.var_ranges()
    transposed: collections.Counter[int] = collections.Counter()
    for node in group.nodes:
        rw = ReadWriteHandler()
        node.run(rw)
        for _, raw in [*rw.reads, *rw.writes]:
            index = sympy.expand(simplify_index(raw, ranges))
            if not index.is_polynomial(*variables) or not index.has(variables[inner]):
                continue
            if index.coeff(variables[inner]) == 1:
                continue
            for k, var in enumerate(variables):
                if k != inner and sizes[k] >= MIN_TILE_EXTENT and index.coeff(var) == 1:
                    transposed[k] += 1
                    break
    if not transposed:
        return None
    return transposed.most_common(1)[0][0]


__all__ = ["transposed_var"]
