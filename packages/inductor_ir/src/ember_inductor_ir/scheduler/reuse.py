"""Buffer reuse: a buffer allocated after another's last reader may take its storage."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set

from ..extern import ExternKernel, ExternOutput, TensorArg
from ..handlers.readwrite import ReadWriteHandler
from ..indexing import index_vars, simplify_index
from ..layout import Layout
from ..nodes import Buffer, ComputedBuffer, InputBuffer
from .kernel_group import Allocation, KernelGroup, ScheduledNode

log = logging.getLogger("ember.fusion")


def _storage_key(buf: Buffer) -> tuple:
    return (buf.get_device(), buf.get_dtype(), buf.layout.storage_numel())


#: Library prims whose results are fresh tensors of the library's (never views of their
#: arguments, never a tensor the library keeps): once dead, their storage is the plan's to
#: hand on, like a computed buffer's.
FRESH_LIBRARY_RESULTS = frozenset(
    {
        "mm", "bmm", "addmm", "convolution", "convolution_backward",
        "sdpa_flash_cpu", "sdpa_flash_cpu_backward", "sdpa_flash_cuda",
        "sdpa_flash_cuda_backward", "sdpa_efficient", "sdpa_efficient_backward",
    }
)  # fmt: skip


def plan_memory(
    groups: Sequence[KernelGroup],
    buffers: dict[str, Buffer],
    keep: set[str],
    donations: Mapping[str, str] | None = None,
    released: Set[str] = frozenset(),
) -> tuple[dict[str, Allocation], dict[str, list[str]]]:
    """Allocations for every computed buffer and, per group, the storages dead after it.

    ``keep`` are buffers whose storage must survive the graph (graph outputs and the bases
    of output views). A dead storage is handed on to a buffer of the same dtype and size
    made by a later group before anything is allocated anew (the wrapper holds a storage
    for its taker: held while fresh memory is allocated, it would raise the peak). Inside a group, a computed buffer is written in place into the
    storage of a buffer its own group reads for the last time (``Allocation.in_place``)
    where that is safe (in_place_safe: one layout, every read of it at the element written);
    so are ``donations`` (output buffer -> the graph input its value is written back to, an
    optimizer's parameters and moments). The storages handed on are the plan's own: computed
    buffers', ``out=`` results' and fresh library results' (FRESH_LIBRARY_RESULTS), never a
    graph input's (but for donations) nor what a fallback kernel returns.

    ``released``: graph inputs the caller hands over (a backward's saved activations): each
    is dropped after its last use, so that its storage can go back to the allocator, but
    never handed on (the caller may hold it still: ``retain_graph``).
    """
    last_use: dict[str, int] = {}  # in order of first use: frees and the pool follow it,
    # so the plan is the same in every process (never a set's hash order)
    for k, group in enumerate(groups):
        for name in [*sorted(group.reads), *group.buffer_names()]:
            last_use[name] = k
    keep = _extend_to_extern_inputs(groups, last_use, keep)
    planner = _Planner(groups, buffers, keep, last_use, set(donations or ()), set(released))
    for k, group in enumerate(groups):
        planner.allocate(k, group)
        planner.free(k, group)
    allocations = planner.allocations
    failing = _may_fail(groups) if donations else None
    for out, donor in (donations or {}).items():
        reason = failing or (
            "the input is an output too"
            if donor in keep
            else in_place_safe(groups, buffers, out, donor, accesses_of=planner.accesses_of)
        )
        if reason is None:
            allocations[out] = Allocation(out, donor, in_place=True)
            log.info("in place: %s is written into input %s", out, donor)
        else:
            log.info("not in place: %s into input %s: %s", out, donor, reason)
    return allocations, planner.frees


class _Planner:
    """The plan built group by group: allocations, and a pool of dead storages by key."""

    def __init__(
        self,
        groups: Sequence[KernelGroup],
        buffers: dict[str, Buffer],
        keep: set[str],
        last_use: dict[str, int],
        donated: set[str],
        released: set[str],
    ) -> None:
        self.groups, self.buffers, self.keep, self.last_use = groups, buffers, keep, last_use
        self.donated = donated  # written into graph inputs instead, where safe (donations)
        self.released = released  # graph inputs dropped after their last use
        #: buffers made in storage the plan allocates (and may then hand on)
        self.planned = {
            name
            for group in groups
            for name in group.buffer_names()
            if isinstance(buffers[name], ComputedBuffer)
            or (group.extern is not None and group.extern.writes_out)
        }
        #: library results whose storage is the plan's once dead (FRESH_LIBRARY_RESULTS)
        self.fresh = {
            out.name
            for k, group in enumerate(groups)
            if group.extern is not None and _fresh_results(group.extern)
            for out in group.extern.outputs
            if out.get_dtype().is_floating_point and last_use[out.name] > k  # (else unbound)
        }
        self.allocations: dict[str, Allocation] = {}
        self.frees: dict[str, list[str]] = {g.name: [] for g in groups}
        self.pool: dict[tuple, list[str]] = {}
        self.overwritten: set[str] = set()  # storages a buffer of their last reader took
        self.accesses_of: dict[str, dict] = {}  # in_place_safe's reads and writes, by group

    def allocate(self, k: int, group: KernelGroup) -> None:
        in_registers = group.register_only()  # no storage to give them
        for name in group.buffer_names():
            if name in in_registers:
                continue
            reused, in_place = None, False
            if name in self.planned and name not in self.donated and name not in group.internal:
                # an internal full-row buffer is not given a donor in place: its generator may
                # keep it in registers (a persistent reduction), and the donor's storage then
                # went unused while the group's output took fresh memory (SE-BoTNet's softmax
                # held two [256, 1024, 1024] score maps at once)
                reused = self._overwritable(k, group, name)
                in_place = reused is not None
            if reused is None and name in self.planned and name not in self.keep:
                candidates = self.pool.get(_storage_key(self.buffers[name]), [])
                if candidates:
                    reused = candidates.pop()  # the latest dead: held the shortest
            if reused is None:
                # fresh memory (or the library's): a dead storage held on for a later taker
                # while more is allocated would only add to the peak; freed where it died
                self.pool.clear()
            self.allocations[name] = Allocation(name, reused, in_place=in_place)
            if in_place:
                self.overwritten.add(reused)
                log.info("in place: %s is written into %s, read last by its kernel", name, reused)
            elif reused is not None:
                log.info("buffer reuse: %s takes the storage of %s", name, reused)

    def _overwritable(self, k: int, group: KernelGroup, name: str) -> str | None:
        """A buffer ``group`` reads for the last time whose storage ``name`` may be written
        into (in_place_safe), or None."""
        if group.extern is not None:
            return None
        key = _storage_key(self.buffers[name])
        for donor in sorted(group.reads):
            if (
                self.last_use.get(donor) != k
                or donor in self.keep
                or donor in self.overwritten
                or not (donor in self.planned or donor in self.fresh)
                or _storage_key(self.buffers[donor]) != key
            ):
                continue
            reason = in_place_safe(
                self.groups, self.buffers, name, donor, self.last_use, self.accesses_of
            )
            if reason is None:
                return donor
            log.info("not in place: %s into %s: %s", name, donor, reason)
        return None

    def free(self, k: int, group: KernelGroup) -> None:
        for name, last in self.last_use.items():
            if last != k or name in self.keep:
                continue
            buf = self.buffers.get(name)
            if name in self.overwritten:
                # its storage is the buffer written into it now: only the name goes
                self.frees[group.name].append(name)
            elif name in self.planned or name in self.fresh:
                self.frees[group.name].append(name)
                self.pool.setdefault(_storage_key(buf), []).append(name)
            elif isinstance(buf, ExternOutput) or name in self.released:
                # The library allocated it, or the caller handed it over: dropped at its
                # last use (not held to the end of the call), its storage not the plan's to
                # hand on.
                self.frees[group.name].append(name)


def _fresh_results(extern: ExternKernel) -> bool:
    return (
        extern.kernel_name in FRESH_LIBRARY_RESULTS
        and not extern.fallback
        and extern.mutates is None
        and not extern.writes_out
    )


def _may_fail(groups: Sequence[KernelGroup]) -> str | None:
    """Why a call of the graph may raise after it began writing (then nothing is written in
    place: a caller that reruns the graph's ops eagerly to raise eager's error must find
    its inputs untouched): a fallback kernel, or a kernel with checked indirect indexing."""
    for group in groups:
        if group.extern is not None:
            if group.extern.fallback:
                return f"{group.name} runs a fallback kernel, which may raise"
            continue
        for node in group.nodes:
            if _reads_and_writes(node.buffer).indirect_count:
                return f"{node.buffer.name} indexes indirectly (checked: it may raise)"
    return None


def _reads_and_writes(node: ComputedBuffer) -> ReadWriteHandler:
    rw = ReadWriteHandler()
    node.store_body(
        rw, index_vars("i", len(node.ranges)), index_vars("r", len(node.reduction_ranges))
    )
    return rw


def in_place_safe(
    groups: Sequence[KernelGroup],
    buffers: dict[str, Buffer],
    out: str,
    donor: str,
    last_use: Mapping[str, int] | None = None,
    accesses_of: dict[str, dict] | None = None,
) -> str | None:
    """Why ``out`` may not be written into ``donor``'s storage, or None. ``accesses_of``:
    each group's nodes' reads and writes by group name, kept across calls of one plan (a
    group of hundreds of nodes is asked about many pairs: a 200-multiply chain and its
    backward spent 80 s re-reading its bodies).

    ``donor`` is a graph input (a donation), or, given ``last_use`` (buffer -> the last group
    reading it, aliases' readers included), a buffer of the graph. Safe when the two have one
    layout (for a buffer of the graph: one storage from one offset; loads and stores index
    storage, so the shapes may differ), the group computing ``out`` is the last to read
    ``donor``, and inside it every read of ``donor`` is at the element ``out`` writes at the
    same point of the group's iteration space, by ``out``'s own loop body or by one emitted
    before it (a reduction's pass over the point ends before the pass writing it: the same
    program reads each element before it overwrites it, and nothing reads the old value
    afterwards). A reader
    that recomputes a written value inline (an optimizer's parameter update reading both
    moments' old values) comes before the moments' stores in that order."""
    buf, inp = buffers.get(out), buffers.get(donor)
    if not isinstance(buf, ComputedBuffer) or inp is None:
        return "not a computed buffer"
    if last_use is None and not isinstance(inp, InputBuffer):
        return "not a computed buffer and a graph input"
    if not _one_storage(buf.layout, inp.layout, shape=last_use is None):
        return "another layout"
    producer = next((k for k, g in enumerate(groups) if out in g.buffer_names()), None)
    if producer is None or groups[producer].extern is not None:
        return "not computed by a loops group"
    for group in groups[producer + 1 :]:
        if donor in group.reads:
            return f"{group.name} reads the input after"
    if last_use is not None and last_use.get(donor, -1) > producer:
        return "an alias of it is read after"
    group = groups[producer]
    accesses = (accesses_of or {}).get(group.name)
    if accesses is None:
        ranges = group.var_ranges()
        accesses = {node.buffer.name: _accesses(node, ranges) for node in group.nodes}
        if accesses_of is not None:
            accesses_of[group.name] = accesses
    stores = {index for name, index in accesses[out][1] if name == out}
    if len(stores) != 1:
        return "written at more than one index"
    written_after = False
    for node in group.nodes:
        loads = {index for name, index in accesses[node.buffer.name][0] if name == donor}
        if not loads:
            written_after |= node.buffer.name == out
            continue
        if not loads <= stores:
            return f"{node.buffer.name} reads the input at other elements than the one written"
        if written_after:
            return f"{node.buffer.name} reads the input after it is written"
        written_after |= node.buffer.name == out
    return None


def _accesses(node: ScheduledNode, ranges: Mapping) -> tuple[list, list]:
    """What a scheduled node reads and writes, indexed in its group's variables (so that
    the nodes of one group compare: a reduction's reads at (i, r), a pointwise node's over
    the same points), simplified over the group's ranges."""
    rw = ReadWriteHandler()
    node.run(rw)
    reads = [(name, simplify_index(index, ranges)) for name, index in rw.reads]
    writes = [(name, simplify_index(index, ranges)) for name, index in rw.writes]
    return reads, writes


def _one_storage(a: Layout, b: Layout, *, shape: bool) -> bool:
    """Whether layouts ``a`` and ``b`` span one storage from one offset (and, with ``shape``,
    have one size and stride)."""
    if (a.device, a.dtype, a.offset, a.storage_numel()) != (
        b.device, b.dtype, b.offset, b.storage_numel()
    ):  # fmt: skip
        return False
    return not shape or (list(a.size), list(a.stride)) == (list(b.size), list(b.stride))


def _extend_to_extern_inputs(
    groups: Sequence[KernelGroup], last_use: dict[str, int], keep: set[str]
) -> set[str]:
    """A fallback kernel (a prim's reference implementation) may return views of its inputs
    (``unfold`` does), and an in-place kernel returns the buffer it wrote: those inputs live
    as long as the outputs do, and are kept with them. Library kernels (mm, convolution)
    return fresh tensors. Walked backwards so that chains of them carry liveness all the
    way back."""
    keep = set(keep)
    for group in reversed(groups):
        extern = group.extern
        if extern is None or not (extern.fallback or extern.mutates):
            continue
        outputs = [o.name for o in extern.outputs]
        aliased = extern.tensor_args() if extern.fallback else [TensorArg(extern.mutates)]
        for arg in aliased:
            for out in outputs:
                last_use[arg.name] = max(last_use.get(arg.name, -1), last_use.get(out, -1))
                if out in keep:
                    keep.add(arg.name)
    return keep
