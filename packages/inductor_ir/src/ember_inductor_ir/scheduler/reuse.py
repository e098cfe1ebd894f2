"""Buffer reuse: a buffer allocated after another's last reader may take its storage."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..extern import ExternOutput, TensorArg
from ..nodes import Buffer, ComputedBuffer
from .kernel_group import Allocation, KernelGroup

log = logging.getLogger("ember.fusion")


def _storage_key(buf: Buffer) -> tuple:
    return (buf.get_device(), buf.get_dtype(), buf.layout.storage_numel())


def plan_memory(
    groups: Sequence[KernelGroup], buffers: dict[str, Buffer], keep: set[str]
) -> tuple[dict[str, Allocation], dict[str, list[str]]]:
    """Allocations for every computed buffer and, per group, the storages dead after it.

    ``keep`` are buffers whose storage must survive the graph (graph outputs and the bases
    of output views). A storage is handed on only between groups: never inside one.
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
    return allocations, frees


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
