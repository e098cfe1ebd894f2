"""Buffer reuse: a buffer allocated after another's last reader may take its storage."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ..extern import ExternOutput, TensorArg
from ..handlers.readwrite import ReadWriteHandler
from ..indexing import index_vars
from ..nodes import Buffer, ComputedBuffer, InputBuffer
from .kernel_group import Allocation, KernelGroup

log = logging.getLogger("ember.fusion")


def _storage_key(buf: Buffer) -> tuple:
    return (buf.get_device(), buf.get_dtype(), buf.layout.storage_numel())


def plan_memory(
    groups: Sequence[KernelGroup],
    buffers: dict[str, Buffer],
    keep: set[str],
    donations: Mapping[str, str] | None = None,
) -> tuple[dict[str, Allocation], dict[str, list[str]]]:
    """Allocations for every computed buffer and, per group, the storages dead after it.

    ``keep`` are buffers whose storage must survive the graph (graph outputs and the bases
    of output views). A storage is handed on only between groups: never inside one, but
    for ``donations`` (output buffer -> the graph input its value is written back to, an
    optimizer's parameters and moments): the output takes the input's storage where its
    kernel is the input's last reader and reads it at the index it writes (in_place_safe).
    """
    last_use: dict[str, int] = {}
    for k, group in enumerate(groups):
        for name in group.reads | set(group.buffer_names()):
            last_use[name] = k
    keep = _extend_to_extern_inputs(groups, last_use, keep)
    planned = {
        name
        for group in groups
        for name in group.buffer_names()
        if isinstance(buffers[name], ComputedBuffer)
        or (group.extern is not None and group.extern.writes_out)
    }
    owner: dict[str, str] = {}  # buffer -> the buffer whose storage it lives in
    allocations: dict[str, Allocation] = {}
    frees: dict[str, list[str]] = {g.name: [] for g in groups}
    pool: dict[tuple, list[str]] = {}
    for k, group in enumerate(groups):
        for name in group.buffer_names():
            buf = buffers[name]
            reused = None
            if name in planned and name not in keep:
                candidates = pool.get(_storage_key(buf), [])
                if candidates:
                    reused = candidates.pop(0)
            allocations[name] = Allocation(name, reused)
            owner[name] = owner.get(reused, reused) if reused else name
            if reused is not None:
                log.info("buffer reuse: %s takes the storage of %s", name, reused)
        for name, last in last_use.items():
            buf = buffers.get(name)
            if last != k or name in keep:
                continue
            if name in planned:
                frees[group.name].append(name)
                pool.setdefault(_storage_key(buf), []).append(name)
            elif isinstance(buf, ExternOutput):
                # The library allocated it: dropped at its last use (not held to the end
                # of the call), but its storage is not the plan's to hand on.
                frees[group.name].append(name)
    failing = _may_fail(groups) if donations else None
    for out, donor in (donations or {}).items():
        reason = failing or (
            "the input is an output too"
            if donor in keep
            else in_place_safe(groups, buffers, out, donor)
        )
        if reason is None:
            allocations[out] = Allocation(out, donor, in_place=True)
            log.info("in place: %s is written into input %s", out, donor)
        else:
            log.info("not in place: %s into input %s: %s", out, donor, reason)
    return allocations, frees


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
    groups: Sequence[KernelGroup], buffers: dict[str, Buffer], out: str, donor: str
) -> str | None:
    """Why output ``out`` may not be written into graph input ``donor``'s storage, or None.

    Safe when the two have one layout, the group computing ``out`` is the last to read
    ``donor``, and inside it every read of ``donor`` is at the element ``out`` writes, by
    ``out``'s own loop body or by one emitted before it (the same program reads each
    element before it overwrites it, and nothing reads the old value afterwards). A reader
    that recomputes a written value inline (an optimizer's parameter update reading both
    moments' old values) comes before the moments' stores in that order."""
    buf, inp = buffers.get(out), buffers.get(donor)
    if not isinstance(buf, ComputedBuffer) or not isinstance(inp, InputBuffer):
        return "not a computed buffer and a graph input"
    a, b = buf.layout, inp.layout
    same = (a.device, a.dtype, list(a.size), list(a.stride), a.offset) == (
        b.device, b.dtype, list(b.size), list(b.stride), b.offset
    )  # fmt: skip
    if not same:
        return "another layout"
    producer = next((k for k, g in enumerate(groups) if out in g.buffer_names()), None)
    if producer is None or groups[producer].extern is not None:
        return "not computed by a loops group"
    for group in groups[producer + 1 :]:
        if donor in group.reads:
            return f"{group.name} reads the input after"
    rw = _reads_and_writes(buf)
    stores = {index for name, index in rw.writes if name == out}
    if len(stores) != 1:
        return "written at more than one index"
    written_after = False
    for node in groups[producer].nodes:
        if node.buffer.name == out:
            written_after = True
            reads = rw.reads
        else:
            reads = _reads_and_writes(node.buffer).reads
            if list(node.buffer.ranges) != list(buf.ranges) or node.buffer.reduction_ranges:
                reads = [(name, None) for name, _ in reads]  # another loop: indices differ
        loads = {index for name, index in reads if name == donor}
        if not loads:
            continue
        if not loads <= stores:
            return f"{node.buffer.name} reads the input at other elements than the one written"
        if written_after and node.buffer.name != out:
            return f"{node.buffer.name} reads the input after it is written"
    return None


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
