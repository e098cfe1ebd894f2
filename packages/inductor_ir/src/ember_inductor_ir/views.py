"""Views as index maps: a view never copies, it rewrites the index its reader asks for.

``View(base, size, reindex)`` reads ``base[reindex(index)]``. When the base is a buffer with
a decided layout, ``strided_layout`` also describes the view as (size, stride, offset) over the
base's storage, so extern kernels and graph outputs can take it without a copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from .indexing import Expr, as_exprs, contiguous_strides, flat_to_multi, multi_to_flat
from .layout import FixedLayout, Layout
from .nodes import Buffer, IRNode, Loader, TensorBox

Reindex = Callable[[Sequence[Expr]], list[Expr]]
LayoutMap = Callable[[Layout], Layout | None]


@dataclass(eq=False)
class View(IRNode):
    base: IRNode
    size: list[Expr]
    reindex: Reindex
    #: How the view acts on a strided base layout (None: not expressible as strides).
    layout_map: LayoutMap | None
    kind: str
    #: reindex's answers by index (reindex is a function of the index alone; bodies run the
    #: same view at the same loop variables many times: lowering, scheduling, codegen)
    _reindexed: dict[tuple, tuple] = field(default_factory=dict, init=False, repr=False)

    def get_size(self) -> list[Expr]:
        return self.size

    def get_dtype(self) -> torch.dtype:
        return self.base.get_dtype()

    def get_device(self) -> torch.device:
        return self.base.get_device()

    def make_loader(self) -> Loader:
        inner = self.base.make_loader()  # bound now, like TensorBox.make_loader
        reindexed = self._reindexed

        def load(ops: Any, index: Sequence[Expr]) -> Any:
            key = tuple(index)
            mapped = reindexed.get(key)
            if mapped is None:
                mapped = reindexed[key] = tuple(self.reindex(index))
            return inner(ops, list(mapped))

        return load


def unwrap(node: IRNode) -> IRNode:
    while isinstance(node, TensorBox):
        node = node.data
    return node


def storage_view(node: IRNode) -> tuple[Buffer, Layout] | None:
    """(buffer, layout over its storage) if ``node`` is a buffer or a strided view of one."""
    node = unwrap(node)
    if isinstance(node, Buffer):
        return node, node.layout
    if isinstance(node, View) and node.layout_map is not None:
        inner = storage_view(node.base)
        if inner is None:
            return None
        mapped = node.layout_map(inner[1])
        return None if mapped is None else (inner[0], mapped)
    return None


def _relayout(layout: Layout, size: Sequence[Expr], stride: Sequence[Expr], offset: Expr) -> Layout:
    return FixedLayout(layout.device, layout.dtype, list(size), list(stride), offset)


def permute(base: IRNode, dims: Sequence[int]) -> View:
    size = base.get_size()
    inverse = [0] * len(dims)
    for out_pos, d in enumerate(dims):
        inverse[d] = out_pos

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [index[inverse[d]] for d in range(len(dims))]

    def layout_map(lay: Layout) -> Layout:
        return _relayout(
            lay, [lay.size[d] for d in dims], [lay.stride[d] for d in dims], lay.offset
        )

    return View(base, [size[d] for d in dims], reindex, layout_map, "permute")


def broadcast_in_dim(base: IRNode, shape: Sequence[object], bdims: Sequence[int]) -> View:
    """Place base dim k at output dim bdims[k]; other output dims (and base dims of size 1
    stretched to a larger output) read index 0."""
    out = as_exprs(shape)
    in_size = base.get_size()

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [
            sympy.Integer(0) if in_size[k] == 1 and out[d] != 1 else index[d]
            for k, d in enumerate(bdims)
        ]

    def layout_map(lay: Layout) -> Layout:
        stride = [sympy.Integer(0)] * len(out)
        for k, d in enumerate(bdims):
            stride[d] = sympy.Integer(0) if in_size[k] == 1 and out[d] != 1 else lay.stride[k]
        return _relayout(lay, out, stride, lay.offset)

    return View(base, out, reindex, layout_map, "broadcast_in_dim")


def squeeze(base: IRNode, dims: Sequence[int]) -> View:
    size = base.get_size()
    drop = {d % max(len(size), 1) for d in dims}
    keep = [d for d in range(len(size)) if d not in drop]

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        full = [sympy.Integer(0)] * len(size)
        for pos, d in enumerate(keep):
            full[d] = index[pos]
        return full

    def layout_map(lay: Layout) -> Layout:
        return _relayout(lay, [size[d] for d in keep], [lay.stride[d] for d in keep], lay.offset)

    return View(base, [size[d] for d in keep], reindex, layout_map, "squeeze")


def expand_dims(base: IRNode, dims: Sequence[int]) -> View:
    size = base.get_size()
    rank = len(size) + len(dims)
    new = {d % rank for d in dims}
    old_positions = [d for d in range(rank) if d not in new]
    out = [sympy.Integer(1)] * rank
    for k, d in enumerate(old_positions):
        out[d] = size[k]

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [index[d] for d in old_positions]

    def layout_map(lay: Layout) -> Layout:
        stride = [sympy.Integer(1)] * rank
        for k, d in enumerate(old_positions):
            stride[d] = lay.stride[k]
        return _relayout(lay, out, stride, lay.offset)

    return View(base, out, reindex, layout_map, "expand_dims")


def slice_view(
    base: IRNode, starts: Sequence[object], limits: Sequence[object], steps: Sequence[object]
) -> View:
    start, limit, step = as_exprs(starts), as_exprs(limits), as_exprs(steps)
    out = [
        sympy.Max(0, (lim - s + st - 1) // st)
        if not (lim - s).is_Integer
        else sympy.Integer(max(0, (int(lim - s) + int(st) - 1) // int(st)))
        for s, lim, st in zip(start, limit, step, strict=True)
    ]

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        return [s + i * st for i, s, st in zip(index, start, step, strict=True)]

    def layout_map(lay: Layout) -> Layout:
        offset = lay.offset + sympy.Add(*[s * st for s, st in zip(start, lay.stride, strict=False)])
        stride = [a * st for a, st in zip(lay.stride, step, strict=True)]
        return _relayout(lay, out, stride, offset)

    return View(base, out, reindex, layout_map, "slice")


def unfold(base: IRNode, dim: int, size: object, step: object) -> View:
    """Sliding windows of ``size`` every ``step`` along ``dim``, as a new last dimension."""
    old = base.get_size()
    rank = len(old)
    dim = dim % max(rank, 1)
    window, stride_step = as_exprs([size, step])
    if rank == 0:
        out = [window]
    else:
        count = (old[dim] - window) // stride_step + 1
        out = [*old[:dim], count, *old[dim + 1 :], window]

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        if rank == 0:
            return []
        mapped = list(index[:rank])
        mapped[dim] = index[dim] * stride_step + index[rank]
        return mapped

    def layout_map(lay: Layout) -> Layout:
        if rank == 0:
            return _relayout(lay, out, [sympy.Integer(1)], lay.offset)
        stride = list(lay.stride)
        stride[dim] = lay.stride[dim] * stride_step
        return _relayout(lay, out, [*stride, lay.stride[dim]], lay.offset)

    return View(base, out, reindex, layout_map, "unfold")


def as_strided(
    base: IRNode, size: Sequence[object], stride: Sequence[object], offset: object
) -> View:
    """Index the base's storage directly. The base must be a realized buffer (the caller
    realizes it); offset is absolute in that storage."""
    sizes, strides, off = as_exprs(size), as_exprs(stride), as_exprs([offset])[0]
    buffer_and_layout = storage_view(base)
    if buffer_and_layout is None:
        raise TypeError("as_strided needs a realized base buffer")
    buffer = buffer_and_layout[0]

    def reindex_storage(index: Sequence[Expr]) -> Any:
        return off + sympy.Add(
            *[i * s for i, s, n in zip(index, strides, sizes, strict=False) if n != 1]
        )

    view = View(base, sizes, lambda index: list(index), None, "as_strided")

    def load(ops: Any, index: Sequence[Expr]) -> Any:
        return buffer.load(ops, reindex_storage(index))

    view.make_loader = lambda: load  # type: ignore[method-assign]
    view.layout_map = lambda lay: _relayout(lay, sizes, strides, off)
    return view


def _reshape_groups(old: list[Expr], new: list[Expr]) -> list[tuple[list[int], list[int]]] | None:
    """Pair runs of old and new dims with equal products. Symbolic sizes pair where one
    run's product divides the other's for every size (``[1, s0, 4, 16]`` and ``[s0, 64]``:
    ``[1, s0] | [s0]``, ``[4, 16] | [64]``); None where no such pairing is proven."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        gi: list[int] = []
        gj: list[int] = []
        pi: Expr = sympy.Integer(1)
        pj: Expr = sympy.Integer(1)
        if i < len(old):
            gi.append(i)
            pi = pi * old[i]
            i += 1
        if j < len(new):
            gj.append(j)
            pj = pj * new[j]
            j += 1
        while sympy.expand(pi - pj) != 0:
            grow_old = _divides(pi, pj)
            if grow_old is None:
                return None
            if grow_old:
                if i >= len(old):
                    return None
                gi.append(i)
                pi = pi * old[i]
                i += 1
            else:
                if j >= len(new):
                    return None
                gj.append(j)
                pj = pj * new[j]
                j += 1
        groups.append((gi, gj))
    return groups


def _divides(a: Expr, b: Expr) -> bool | None:
    """True when the run of product a grows (a divides b), False when the run of b grows,
    None when neither division is proven for every value of the size symbols."""
    if a.is_Integer and b.is_Integer:
        return int(a) < int(b)  # static sizes: grow the smaller run, as always
    for num, den, answer in ((b, a, True), (a, b, False)):
        if den == 0:
            continue
        numer, denom = sympy.fraction(sympy.cancel(num / den))
        if denom == 1 and _integer_polynomial(numer):
            return answer
    return None


def _integer_polynomial(expr: Expr) -> bool:
    """A polynomial in the size symbols with integer coefficients (an integer for every
    value of the symbols)."""
    if expr.is_Integer:
        return True
    symbols = sorted(expr.free_symbols, key=str)
    if not expr.is_polynomial(*symbols):
        return False
    return all(c.is_Integer for c in sympy.Poly(expr, *symbols).coeffs())


def reshape(base: IRNode, shape: Sequence[object]) -> View:
    old = base.get_size()
    new = as_exprs(shape)
    groups = _reshape_groups(old, new)

    def reindex(index: Sequence[Expr]) -> list[Expr]:
        if groups is None:
            return flat_to_multi(multi_to_flat(index, new), old)
        out: list[Expr] = [sympy.Integer(0)] * len(old)
        for gi, gj in groups:
            flat = multi_to_flat([index[j] for j in gj], [new[j] for j in gj])
            for d, e in zip(gi, flat_to_multi(flat, [old[i] for i in gi]), strict=True):
                out[d] = e
        return out

    def layout_map(lay: Layout) -> Layout | None:
        if lay.is_contiguous():
            return _relayout(lay, new, contiguous_strides(new), lay.offset)
        if groups is None:
            return None
        # each run of merged or split dims must be one contiguous run in memory (a batch
        # of column-major matrices [B, H, D, N] merged to [B*H, D, N])
        stride: list[Expr] = [sympy.Integer(0)] * len(new)
        for gi, gj in groups:
            step = _run_stride(lay, gi)
            if step is None:
                return None
            for j in reversed(gj):
                stride[j] = step
                step = step * new[j]
        return _relayout(lay, new, stride, lay.offset)

    return View(base, new, reindex, layout_map, "reshape")


def _run_stride(lay: Layout, dims: Sequence[int]) -> Expr | None:
    """The stride of the innermost of ``dims`` where those dims (size-1 ones aside) step
    through memory as one row-major run, else None."""
    moving = [d for d in dims if sympy.sympify(lay.size[d]) != 1]
    for outer, inner in itertools.pairwise(moving):
        if sympy.expand(lay.stride[outer] - lay.stride[inner] * lay.size[inner]) != 0:
            return None
    return sympy.sympify(lay.stride[moving[-1]]) if moving else sympy.Integer(1)
