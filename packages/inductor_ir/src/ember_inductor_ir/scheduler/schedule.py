"""``schedule(lowering)``: order the lowered operations into fused kernel groups.

Steps: freeze layouts; dead-code elimination; greedy fusion in program order (each
operation joins the best existing group that can legally take it: a group that produces
what it reads first (vertical), else one that reads the same buffers (horizontal));
a topological order of the groups; the memory plan. Every fusion decision is logged on
``ember.fusion`` with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import sympy

from ..errors import SchedulingError
from ..extern import ExternKernel
from ..layout import FlexibleLayout
from ..nodes import ComputedBuffer
from .collectives import spread_collectives
from .combine import gather_input_reads
from .dce import eliminate_dead_code
from .dependencies import Operation, reads_memo, writes_of
from .fusion import Placements, Refused, form_group
from .kernel_group import KernelGroup, Schedule
from .memory_order import order_for_memory
from .naming import extern_kernel_name, loops_kernel_name
from .pass_order import in_pass_order
from .reuse import plan_memory

if TYPE_CHECKING:
    from ..graph import GraphLowering

log = logging.getLogger("ember.fusion")


class _Fusion:
    """What one fusion pass computes once and asks again: each operation's reads, and
    each placement of an operation in a kernel space (with its accesses)."""

    def __init__(self, reads: Callable[[Operation], frozenset[str]]) -> None:
        self.reads = reads
        self.placements = Placements()


class _Draft:
    """A group being built: its operations and where their outputs are read."""

    def __init__(self, op: Operation, reads: frozenset[str]) -> None:
        self.ops: list[Operation] = [op]
        self.reads: set[str] = set(reads)
        self.writes: set[str] = set(writes_of(op))

    @property
    def is_extern(self) -> bool:
        return isinstance(self.ops[0], ExternKernel)

    def label(self) -> str:
        return "+".join(op.name for op in self.ops)


def _reaches(start: _Draft, goal: _Draft, producer_of: dict[str, _Draft]) -> bool:
    """Whether ``goal`` depends (transitively) on ``start``."""
    stack, seen = [goal], set()
    while stack:
        draft = stack.pop()
        if id(draft) in seen:
            continue
        seen.add(id(draft))
        for name in draft.reads:
            producer = producer_of.get(name)
            if producer is None or producer is draft:
                continue
            if producer is start:
                return True
            stack.append(producer)
    return False


#: buffers one kernel takes at most (read or written): a C++ kernel is called through
#: ctypes, which passes at most 1024 arguments, and a Triton kernel's pointers fill its
#: launch's parameter space (1300 parameters summed into one kernel could not be called)
MAX_GROUP_BUFFERS = 512


def _too_many_buffers(draft: _Draft, op: ComputedBuffer, reads: frozenset[str]) -> bool:
    if len(draft.reads) + len(draft.writes) + len(reads) + 1 <= MAX_GROUP_BUFFERS:
        return False  # the sum bounds the union
    return len(draft.reads | draft.writes | reads | set(writes_of(op))) > MAX_GROUP_BUFFERS


def _try_join(
    draft: _Draft, op: ComputedBuffer, producer_of: dict[str, _Draft], fusion: _Fusion
) -> str | None:
    """None when ``op`` may join ``draft``; otherwise the reason it may not."""
    if _too_many_buffers(draft, op, fusion.reads(op)):
        return f"more than {MAX_GROUP_BUFFERS} buffers in one kernel"
    for name in sorted(fusion.reads(op)):
        other = producer_of.get(name)
        if other is not None and other is not draft and _reaches(draft, other, producer_of):
            return f"{op.name} also reads {name}, made by {other.label()} after {draft.label()}"
    try:
        form_group([*draft.ops, op], fusion.placements)  # type: ignore[list-item]
    except Refused as exc:
        return str(exc)
    return None


def _candidates(op: ComputedBuffer, drafts: list[_Draft], reads: frozenset[str]) -> list[tuple]:
    out = []
    for draft in drafts:
        if draft.is_extern:
            continue
        produced = len(reads & draft.writes)
        shared = len(reads & draft.reads)
        if produced or shared:
            kind = "vertical" if produced else "horizontal"
            out.append(((produced, shared), kind, draft))
    out.sort(key=lambda c: c[0], reverse=True)
    return out


#: library calls a large value may be moved back over by joining an earlier group (a
#: norm's output beside its q, k and v projections); more, and it stays near its place
MAX_HOISTED_EXTERNS = 4
#: values smaller than this may go anywhere: held longer, they cost nothing that matters
HOISTED_BYTES_MIN = 1 << 20


def _inputs_ready_at(op: ComputedBuffer, reads: frozenset[str], producer_of: dict[str, _Draft],
                     position: dict[int, int]) -> int | None:  # fmt: skip
    """The index of the last draft making one of ``op``'s inputs (-1: none), where ``op`` is
    a large value the hoisting rule applies to; None for a small one or a size known only at
    run time. Joining a draft more than MAX_HOISTED_EXTERNS library calls before that point
    would hold the value across them: a backward's recomputed value only a late layer's
    gradient reads, made with the first layer's (ViT's 24 norm outputs, 443 MB)."""
    numel = op.layout.storage_numel()
    if not isinstance(numel, int) and not getattr(numel, "is_Integer", False):
        return None
    if int(numel) * op.get_dtype().itemsize < HOISTED_BYTES_MIN:
        return None
    return max((position[id(p)] for n in reads if (p := producer_of.get(n))), default=-1)


def _ends_what_it_reads(
    op: ComputedBuffer, draft: _Draft, reads: frozenset[str], readers: dict[str, int],
    outputs: set[str], sizes: Callable[[str], int | None],
) -> bool:  # fmt: skip
    """Whether ``op`` is the only reader of values ``draft`` makes that hold at least its own
    bytes: joined to ``draft``, it is held from there on, but those values no longer are
    (they need not be stored at all). A max pool's int64 window offsets were held through
    the rest of the forward for the int8 copy saved for the backward, made at its end."""
    own = sizes(op.name)
    if own is None:
        return False
    ended = 0
    for name in reads & draft.writes:
        size = sizes(name)
        if readers.get(name, 0) == 1 and name not in outputs and size is not None:
            ended += size
    return ended >= own


def _byte_sizes(ops: list[Operation]) -> Callable[[str], int | None]:
    known: dict[str, int | None] = {}
    for op in ops:
        if isinstance(op, ComputedBuffer):
            numel = sympy.sympify(op.layout.storage_numel())
            known[op.name] = int(numel) * op.get_dtype().itemsize if numel.is_Integer else None
    return lambda name: known.get(name)


def _fuse(ops: list[Operation], fusion: _Fusion, outputs: set[str]) -> list[_Draft]:
    drafts: list[_Draft] = []
    producer_of: dict[str, _Draft] = {}
    position: dict[int, int] = {}  # a draft's index in ``drafts``
    externs: list[int] = []  # library-call drafts among drafts[: k + 1]
    readers: dict[str, int] = {}
    for op in ops:
        for name in fusion.reads(op):
            readers[name] = readers.get(name, 0) + 1
    sizes = _byte_sizes(ops)
    for op in ops:
        joined = None
        if isinstance(op, ComputedBuffer):
            reads = fusion.reads(op)
            ready = _inputs_ready_at(op, reads, producer_of, position)
            for _, kind, draft in _candidates(op, drafts, reads):
                start = position[id(draft)] if ready is None else max(position[id(draft)], ready)
                if (
                    ready is not None
                    and externs[-1] - externs[start] > MAX_HOISTED_EXTERNS
                    and not _ends_what_it_reads(op, draft, reads, readers, outputs, sizes)
                ):
                    log.info("no fusion of %s into %s (%s): too far back", op.name,
                             draft.label(), kind)  # fmt: skip
                    continue
                reason = _try_join(draft, op, producer_of, fusion)
                if reason is None:
                    log.info("fuse %s into %s (%s)", op.name, draft.label(), kind)
                    draft.ops.append(op)
                    draft.reads |= fusion.reads(op)
                    draft.writes |= set(writes_of(op))
                    joined = draft
                    break
                log.info("no fusion of %s into %s (%s): %s", op.name, draft.label(), kind, reason)
        if joined is None:
            joined = _Draft(op, fusion.reads(op))
            position[id(joined)] = len(drafts)
            drafts.append(joined)
            externs.append((externs[-1] if externs else 0) + joined.is_extern)
        for name in writes_of(op):
            producer_of[name] = joined
    return drafts


def _order(drafts: list[_Draft]) -> list[_Draft]:
    """Topological order of the groups (stable: program order where free)."""
    producer_of = {name: d for d in drafts for name in d.writes}
    done: set[int] = set()
    ordered: list[_Draft] = []
    visiting: set[int] = set()

    def visit(draft: _Draft) -> None:
        if id(draft) in done:
            return
        if id(draft) in visiting:
            raise SchedulingError(f"fusion made a cycle through {draft.label()}")
        visiting.add(id(draft))
        for name in sorted(draft.reads):
            producer = producer_of.get(name)
            if producer is not None and producer is not draft:
                visit(producer)
        visiting.discard(id(draft))
        done.add(id(draft))
        ordered.append(draft)

    for draft in drafts:
        visit(draft)
    return ordered


def _in_memory_order(
    drafts: list[_Draft], lowering: GraphLowering, outputs: set[str], release_inputs: bool
) -> list[_Draft]:
    """``drafts`` reordered where that lowers the peak (memory_order.py); graphs with
    sizes unknown until run time keep their order."""
    sizes: dict[str, int] = {}
    for name, buf in lowering.buffers.items():
        numel = sympy.sympify(buf.layout.storage_numel())
        if not numel.is_Integer:
            return drafts
        sizes[name] = int(numel) * buf.get_dtype().itemsize
    keep = set(outputs) | set(lowering.constants)
    if not release_inputs:
        keep |= set(lowering.graph_inputs)
    ordered, before, after = order_for_memory(drafts, lambda n: sizes.get(n, 0), keep)
    if ordered is not drafts:
        log.info("groups reordered for memory: live peak %d -> %d bytes", before, after)
    return ordered


def schedule(lowering: GraphLowering, *, release_inputs: bool = False) -> Schedule:
    """Fuse and order ``lowering``'s operations into kernel groups with a memory plan.
    ``release_inputs``: the caller hands its inputs over (a list the wrapper empties): each
    is dropped after its last use (a backward's saved activations, freed as it goes)."""
    for buf in lowering.buffers.values():
        if isinstance(buf.layout, FlexibleLayout):
            buf.layout.freeze()
    outputs = {spec.name for spec in lowering.graph_outputs if spec.name is not None}
    fusion = _Fusion(reads_memo())  # for this call: the layouts are frozen from here on
    ops = eliminate_dead_code(lowering.operations, outputs, fusion.reads)
    drafts = _in_memory_order(
        _order(_fuse(ops, fusion, outputs)), lowering, outputs, release_inputs
    )
    drafts = spread_collectives(drafts)
    groups: list[KernelGroup] = []
    for k, draft in enumerate(drafts):
        first = draft.ops[0]
        if isinstance(first, ExternKernel):
            device = first.outputs[0].get_device() if first.outputs else None
            name = extern_kernel_name(k, first.kernel_name)
            groups.append(KernelGroup(name, device, extern=first, reads=set(draft.reads)))
            continue
        formed = form_group(draft.ops, fusion.placements)  # type: ignore[arg-type]
        nodes = in_pass_order(formed.nodes, fusion.placements.accesses)
        groups.append(
            KernelGroup(
                loops_kernel_name(k, nodes, bool(formed.reduction_sizes)),
                first.get_device(),
                formed.sizes,
                formed.reduction_sizes,
                nodes,
                reads=draft.reads - draft.writes,
            )
        )
    groups = gather_input_reads(
        groups, set(lowering.graph_inputs) | set(lowering.constants), lowering.target.combine
    )
    _mark_boundaries(groups, outputs)
    released = set(lowering.graph_inputs) if release_inputs else set()
    allocations, frees = plan_memory(
        groups, lowering.buffers, outputs, lowering.donations, released
    )
    log.info("%d operations -> %d kernels", len(ops), len(groups))
    return Schedule(
        groups,
        buffers=lowering.buffers,
        graph_inputs=lowering.graph_inputs,
        graph_outputs=lowering.graph_outputs,
        constants=lowering.constants,
        allocations=allocations,
        frees=frees,
        fallback_counts=dict(lowering.fallback_counts),
        shape_env=lowering.shape_env,
        size_inputs=lowering.size_inputs,
        scalar_reads=lowering.scalar_reads,
        scalar_asserts=lowering.scalar_asserts,
        releases_inputs=release_inputs,
    )


def _mark_boundaries(groups: list[KernelGroup], outputs: set[str]) -> None:
    read_later: set[str] = set(outputs)
    for group in reversed(groups):
        for name in group.buffer_names():
            (group.writes if name in read_later else group.internal).add(name)
        read_later |= group.reads
