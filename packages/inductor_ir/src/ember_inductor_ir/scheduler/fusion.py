"""Fusion rules: can these buffers run as one kernel, and how is each placed in it?

``form_group(buffers)`` picks the iteration space (the reductions' space, or the first
pointwise's), places every buffer in it, and checks every producer -> consumer pair inside:
the consumer must read the producer's element at exactly the index where, in the group's
variables, the producer wrote it. It returns the placed nodes, or the reason it refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy

from ..handlers.readwrite import ReadWriteHandler
from ..indexing import Expr, flat_to_multi, index_vars, multi_to_flat, product, simplify_index
from ..layout import read_strides, stride_order
from ..nodes import ComputedBuffer
from .kernel_group import Placement, ScheduledNode


class Refused(Exception):
    """A fusion that is not legal; the message says why (logged on ``ember.fusion``)."""


@dataclass
class Formed:
    sizes: list[Expr]
    reduction_sizes: list[Expr]
    nodes: list[ScheduledNode]


def remap(
    target_vars: Sequence[Expr], target: Sequence[Expr], sizes: Sequence[Expr], ranges: dict
) -> list[Expr]:
    """Index into ``sizes`` for the row-major same element as ``target_vars`` in ``target``."""
    if [sympy.sympify(s) for s in sizes] == [sympy.sympify(t) for t in target]:
        return list(target_vars)
    flat = multi_to_flat(list(target_vars), list(target))
    return [simplify_index(e, ranges) for e in flat_to_multi(flat, list(sizes))]


def _place(
    buf: ComputedBuffer,
    sizes: list[Expr],
    rsizes: list[Expr],
    logical: tuple[list[Expr], list[Expr]] | None = None,
    rlogical: tuple[list[Expr], list[Expr]] | None = None,
) -> ScheduledNode:
    """Place ``buf`` in the kernel's space. ``logical`` is (index, sizes): the loop variables
    arranged as an index into the anchor buffer's logical shape (the loops may run in its
    storage order, not its logical order); by default the loops are that shape. ``rlogical``
    is the same for the reduction loops."""
    outer, red = index_vars("i", len(sizes)), index_vars("r", len(rsizes))
    ranges = dict(zip([*outer, *red], [*sizes, *rsizes], strict=False))
    lvars, lsizes = logical if logical is not None else (list(outer), list(sizes))
    rvars, rlsizes = rlogical if rlogical is not None else (list(red), list(rsizes))
    numel, rnumel = product(sizes), product(rsizes)
    if buf.is_reduction():
        if product(buf.ranges) != numel or product(buf.reduction_ranges) != rnumel:
            raise Refused(
                f"{buf.name} reduces [{_fmt(buf.ranges)}] x [{_fmt(buf.reduction_ranges)}], "
                f"the kernel iterates [{_fmt(sizes)}] x [{_fmt(rsizes)}]"
            )
        index = remap(lvars, lsizes, buf.ranges, ranges)
        rindex = remap(rvars, rlsizes, buf.reduction_ranges, ranges)
        return ScheduledNode(buf, "reduction", index, rindex)
    own = product(buf.ranges)
    placement: Placement
    if own == numel:
        placement, index = "outer", remap(lvars, lsizes, buf.ranges, ranges)
    elif own == numel * rnumel and (
        full := _full_index(buf, [*lvars, *rvars], [*lsizes, *rlsizes], numel, ranges)
    ):
        placement, index = "full", full
    else:
        raise Refused(
            f"{buf.name} iterates [{_fmt(buf.ranges)}], which fits neither [{_fmt(sizes)}] "
            f"nor [{_fmt(sizes)}] x [{_fmt(rsizes)}]"
        )
    return ScheduledNode(buf, placement, index, [])


def _full_index(
    buf: ComputedBuffer, kvars: list[Expr], ksizes: list[Expr], numel: Expr, ranges: dict
) -> list[Expr] | None:
    """``buf``'s index at each point of a reduction kernel's whole space (outer loops, then
    the reduced ones), where a row of the kernel is a run of ``buf``'s elements: in ``buf``'s
    logical order, else in its storage order (XCiT's norm over [B, N, C] tokens written as
    the [B, C, H, W] channels-last map its convolution reads: the kernel's rows are runs of
    channels in memory, not in the map's logical order); None where neither splits so."""
    if _splits(buf.ranges, numel):
        return remap(kvars, ksizes, buf.ranges, ranges)
    order = loop_order(buf)
    stored = [buf.ranges[d] for d in order]
    if order == sorted(order) or not _splits(stored, numel):
        return None
    placed = remap(kvars, ksizes, stored, ranges)
    index: list[Expr] = [sympy.Integer(0)] * len(order)
    for k, d in enumerate(order):
        index[d] = placed[k]
    return index


def loop_order(anchor: ComputedBuffer) -> list[int]:
    """The order of the kernel's outer loops over ``anchor``'s dims: its storage order, so
    that a channels-last buffer is written with channels innermost (contiguous stores),
    unless the buffer names its own (``ComputedBuffer.loop_order``)."""
    if anchor.loop_order is not None:
        return list(anchor.loop_order)
    layout = anchor.layout
    if len(layout.size) != len(anchor.ranges) or len(layout.size) < 2:
        return list(range(len(anchor.ranges)))
    order = stride_order(layout)
    if anchor.is_reduction():
        return _kept_grain_innermost(anchor, order)
    return order


def _read_strides(anchor: ComputedBuffer) -> list[tuple[list[Expr], list[Expr]]] | None:
    """Each load of ``anchor``'s body as its strides along the outer variables and along the
    reduction variables; None where a load is not affine in them (an indirect or reshaped
    read)."""
    rsizes = list(anchor.reduction_ranges)
    index, rindex = index_vars("i", len(anchor.ranges)), index_vars("r", len(rsizes))
    rw = ReadWriteHandler()
    anchor.data.inner_fn(rw, index, rindex)
    ranges = dict(zip([*index, *rindex], [*anchor.ranges, *rsizes], strict=True))
    reads = []
    for _, expr in rw.reads:
        strides = read_strides(simplify_index(expr, ranges), [*index, *rindex])
        if strides is None:
            return None
        reads.append((strides[: len(index)], strides[len(index) :]))
    return reads


def _kept_grain_innermost(anchor: ComputedBuffer, order: list[int]) -> list[int]:
    """A reduction whose rows are read across the grain (no reduction variable steps 1)
    while one kept dim steps 1 in every such read (a softmax over
    ``proj(x).permute(0, 3, 1, 2)``: the heads innermost in memory, each row walking
    ``heads`` elements apart) runs with that dim innermost, so that neighbouring rows read
    neighbouring elements; in storage order a program's rows were a whole row apart and every
    element its own memory sector."""
    rsizes = list(anchor.reduction_ranges)
    reads = _read_strides(anchor)
    if reads is None:
        return order  # an indirect or reshaped read: no grain to follow
    grains = set()
    for kept, walked in reads:
        if all(w == 0 for n, w in zip(rsizes, walked, strict=True) if n != 1):
            continue  # read once per row (a mean, a weight): moves with the kept dims alone
        if any(w == 1 for w in walked):
            return order  # a row read along its grain
        unit = [
            d for d, (n, k) in enumerate(zip(anchor.ranges, kept, strict=True)) if k == 1 and n != 1
        ]
        grains.add(tuple(unit))
    if len(grains) != 1 or len(next(iter(grains))) != 1:
        return order
    ((grain,),) = grains
    if order[-1] == grain:
        return order
    return [d for d in order if d != grain] + [grain]


#: reductions whose result does not depend on the order the row is walked in (up to float
#: rounding); an arg reduction's index would follow the walk
_ORDER_FREE = frozenset({"sum", "prod", "max", "min", "any", "all", "xor_sum", "welford"})


def reduction_order(anchor: ComputedBuffer, reductions: Sequence[ComputedBuffer]) -> list[int]:
    """The order of the kernel's reduction loops over ``anchor``'s reduction dims: the
    storage order its loads walk, where they all agree (a group norm's statistics over
    channels-last C, H, W walk H, W, then C: contiguous), else the logical order."""
    rsizes = list(anchor.reduction_ranges)
    logical = list(range(len(rsizes)))
    if len(rsizes) < 2 or not all(
        str(getattr(b.data, "reduction_type", "")) in _ORDER_FREE for b in reductions
    ):
        return logical
    reads = _read_strides(anchor)
    if reads is None:
        return logical  # an indirect or reshaped read: no order to follow
    orders = set()
    for _, strides in reads:
        live = [d for d in logical if rsizes[d] != 1 and strides[d] != 0]
        if len(live) < 2:
            continue
        if not all(isinstance(strides[d], sympy.Integer) for d in live):
            return logical
        orders.add(tuple(sorted(live, key=lambda d: (-int(abs(strides[d])), d))))
    if len(orders) != 1:
        return logical
    (walk,) = orders
    rest = iter(walk)  # size-1 and unread dims keep their places
    return [next(rest) if d in walk else d for d in logical]


def _splits(ranges: Sequence[Expr], numel: Expr) -> bool:
    """Whether a prefix of ``ranges`` covers exactly ``numel`` elements (a clean row split)."""
    running = sympy.Integer(1)
    for k in range(len(ranges) + 1):
        if running == numel:
            return True
        if k < len(ranges):
            running = running * ranges[k]
    return False


def _fmt(sizes: Sequence[Expr]) -> str:
    return ", ".join(map(str, sizes))


def _accesses(node: ScheduledNode) -> ReadWriteHandler:
    rw = ReadWriteHandler()
    node.run(rw)
    return rw


Accesses = tuple[list[tuple[str, Expr]], list[tuple[str, Expr]]]


class Placements:
    """form_group's placements, and what each placed body reads and writes, by buffer and
    kernel space: fusion tries an operation against a growing group, placing every member
    again each time. Valid while no layout or body changes: one ``schedule`` (which froze
    the layouts first) makes one and drops it when it returns."""

    def __init__(self) -> None:
        self._placed: dict[tuple, ScheduledNode] = {}
        self._accessed: dict[tuple, Accesses] = {}

    def place(self, buf: ComputedBuffer, *space: list[Expr] | tuple) -> ScheduledNode:
        """``_place(buf, *space)``: a fresh node, its placement computed once."""
        node = self._placed.get(key := self._key(buf, space))
        if node is None:
            node = self._placed[key] = _place(buf, *space)
        return ScheduledNode(node.buffer, node.placement, list(node.index), list(node.rindex))

    def accesses(self, node: ScheduledNode) -> Accesses:
        """The (name, index) pairs ``node``'s body reads and writes, in the group's variables."""
        key = (node.buffer, tuple(node.index), tuple(node.rindex))
        found = self._accessed.get(key)
        if found is None:
            rw = _accesses(node)
            found = self._accessed[key] = (rw.reads, rw.writes)
        return found

    @staticmethod
    def _key(buf: ComputedBuffer, space: tuple) -> tuple:
        sizes, rsizes, (lindex, lsizes), (rindex, rsizes_logical) = space
        return (
            buf, tuple(sizes), tuple(rsizes), tuple(lindex), tuple(lsizes), tuple(rindex),
            tuple(rsizes_logical),
        )  # fmt: skip


def form_group(buffers: Sequence[ComputedBuffer], placements: Placements | None = None) -> Formed:
    """Place ``buffers`` (in program order) in one kernel or raise Refused. ``placements``:
    the ones this schedule has made so far (found there, not made again)."""
    if placements is None:
        placements = Placements()
    reductions = [b for b in buffers if b.is_reduction()]
    anchor = reductions[0] if reductions else buffers[0]
    rlogical_sizes = list(anchor.reduction_ranges)
    rorder = reduction_order(anchor, reductions) if reductions else []
    rsizes = [rlogical_sizes[d] for d in rorder]
    rlogical_index: list[Expr] = [sympy.Integer(0)] * len(rorder)
    for k, d in enumerate(rorder):
        rlogical_index[d] = index_vars("r", len(rorder))[k]
    order = loop_order(anchor)
    logical_sizes = list(anchor.ranges)
    sizes = [logical_sizes[d] for d in order]
    outer = index_vars("i", len(sizes))
    logical_index: list[Expr] = [sympy.Integer(0)] * len(order)
    for k, d in enumerate(order):
        logical_index[d] = outer[k]
    devices = {b.get_device() for b in buffers}
    if len(devices) > 1:
        raise Refused(f"buffers on different devices {sorted(map(str, devices))}")
    rlogical = (rlogical_index, rlogical_sizes)
    logical = (logical_index, logical_sizes)
    nodes = [placements.place(b, sizes, rsizes, logical, rlogical) for b in buffers]
    red = index_vars("r", len(rsizes))
    ranges = dict(zip([*outer, *red], [*sizes, *rsizes], strict=False))
    written: dict[str, Expr] = {}
    for node in nodes:
        reads, writes = placements.accesses(node)
        for name, index in reads:
            if name not in written:
                continue
            if sympy.expand(simplify_index(index, ranges) - written[name]) != 0:
                raise Refused(
                    f"{node.buffer.name} reads {name} at {index}, but {name} is written at "
                    f"{written[name]} in this kernel"
                )
        for name, index in writes:
            written[name] = simplify_index(index, ranges)
    return Formed(sizes, rsizes, nodes)
