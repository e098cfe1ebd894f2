"""The generated Python wrapper of the C++ target: the target-neutral builder
(ember_codegen/wrapper/builder.py: guards, allocation per the memory plan, externs, frees,
outputs) plus what only the CPU has: each data pointer computed once and passed to the
kernels' ctypes functions, native runs of kernels (launch_runs.py), float32 products routed
to oneDNN (onednn_matmul.py), and fresh storages taken from the storage pool
(storage_pool.py) or from a per-site slot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ember_codegen.exc import CodegenError
from ember_codegen.wrapper.builder import WrapperBuilder
from ember_codegen.wrapper.held_layouts import Triple, is_contiguous, triple
from ember_codegen.wrapper.library_calls import OUT_FUNCTIONS, PRIM_IMPLEMENTATIONS
from ember_codegen.wrapper.runtime import adopt_extern_output, relayout_input
from ember_codegen.wrapper.size_bindings import concrete, is_symbolic, value_of
from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg
from ember_inductor_ir.layout import Layout

from . import onednn_matmul
from .kernel import KernelSource
from .launch_runs import LaunchRun
from .storage_pool import STORAGE_POOL, StoragePool, size_class

__all__ = ["STORAGE_POOL", "CppWrapperBuilder", "StoragePool", "runtime_namespace", "size_class"]

#: Buffers of at most this many bytes (static sizes) are allocated anew instead of pooled:
#: the C allocator serves them from memory it has mapped already, and torch.empty_strided
#: (~1 us) costs less than the pool's Python take and give (~2.6 us together).
SMALL_BUFFER_BYTES = 64 << 10


def _small(layout: Layout) -> bool:
    numel = layout.storage_numel()
    return not is_symbolic(numel) and int(numel) * layout.dtype.itemsize <= SMALL_BUFFER_BYTES


class CppWrapperBuilder(WrapperBuilder):
    """``runs``: the native entry points (launch_runs.py) the wrapper calls instead of each
    of their kernels; a run's buffers are allocated before its call and freed after it.

    Fresh buffers come from STORAGE_POOL and dead ones return to it (small ones from a slot
    of their allocation site); float32 products may go to oneDNN (onednn_matmul.py)."""

    def __init__(
        self,
        sched: Schedule,
        kernels: dict[str, KernelSource],
        *,
        trusted_inputs: bool = False,
        runs: Sequence[LaunchRun] = (),
    ) -> None:
        super().__init__(sched, kernels, trusted_inputs=trusted_inputs)
        self.runs = {run.kernel_names: run for run in runs}
        #: kernels of the current run whose call waits for the run's end, and the frees
        #: that wait for that call (see _flush_launches)
        self.pending: list[str] = []
        self.pending_frees: list[str] = []
        self.pointers: set[str] = set()
        #: buffers whose storage the wrapper took from the storage pool -> (dtype, numel,
        #: the condition on the call's sizes under which it did, None: always)
        self.pooled: dict[str, tuple[str, Any, str | None]] = {}
        #: per allocation site of a small fixed-size buffer: its first line (_slot_take);
        #: buffers holding a site's storage -> (site, its layout); sites given back
        self.slots: list[int] = []
        self.slotted: dict[str, tuple[int, Triple]] = {}
        self.returned: set[int] = set()

    # -- storage: the pool and the slots -------------------------------------------------
    def _allocate_new(self, name: str, layout: Layout, want: Triple, dtype: str) -> None:
        if _small(layout):
            self._slot_take(name, want, self._fresh(layout, want, dtype))
            return
        storage = concrete(layout.storage_numel())
        take = f"_pool.take({want[0]}, {want[1]}, {want[2]}, {dtype}, {storage})"
        pooled_if = None
        if is_symbolic(layout.storage_numel()):
            # small at this call's sizes: allocated anew, as a static compile's small buffers
            # are (the pool's Python take and give cost more than torch.empty_strided)
            limit = SMALL_BUFFER_BYTES // layout.dtype.itemsize
            pooled_if = f"{storage} > {limit}"
            take = f"{take} if {pooled_if} else {self._fresh(layout, want, dtype)}"
        self.w.line(f"{name} = {take}")
        self.pooled[name] = (dtype, storage, pooled_if)

    def _took_over(self, name: str, donor: str) -> None:
        if donor in self.pooled:
            self.pooled[name] = self.pooled.pop(donor)  # the storage is this buffer's now
        if donor in self.slotted:
            self.slotted[name] = self.slotted.pop(donor)

    def _slot_take(self, name: str, want: Triple, fresh: str) -> None:
        """A small buffer of fixed size from its allocation site's slot: the tensor this
        site's storage was when it died in the last call (a list pop, ~0.1 us, where a fresh
        tensor costs ~1 us), else ``fresh``. The slots are a default argument of ``call``
        (one list per site and wrapper); pops and appends are atomic, so concurrent calls
        each get their own tensor. A site whose storage never comes back (an output, or a
        buffer that took it over in another layout) keeps the plain allocation (build)."""
        slot = len(self.slots)
        self.slots.append(len(self.w.lines))
        w = self.w
        w.line("try:")
        w.line(f"    {name} = _slots[{slot}].pop()")
        w.line("except IndexError:")
        w.line(f"    {name} = {fresh}")
        self.slotted[name] = (slot, want)

    def _finish_lines(self, lines: list[str]) -> list[str]:
        """``lines`` with the sites whose storage never returns as plain allocations."""
        for slot, at in enumerate(self.slots):
            if slot not in self.returned:
                fresh = lines[at + 3].strip()
                lines[at : at + 4] = [f"    {fresh}", "", "", ""]
        return [line for line in lines if line]

    def _call_defaults(self) -> str:
        defaults = super()._call_defaults()
        if self.returned:
            defaults += f", _slots=[{', '.join('[]' for _ in self.slots)}]"
        return defaults

    def _release(self, name: str, emit: Callable[[str], None]) -> None:
        """``name`` is dead: its storage back to the pool or its slot, the variable gone."""
        if name in self.pooled:  # dead: its storage serves a later allocation
            dtype, storage, pooled_if = self.pooled.pop(name)
            give = f"_pool.give({name}, {dtype}, {storage})"
            emit(give if pooled_if is None else f"if {pooled_if}: {give}")
        slot, layout = self.slotted.pop(name, (None, None))
        if slot is not None and self.held[name] == layout:  # back in the site's layout
            emit(f"_slots[{slot}].append({name})")
            self.returned.add(slot)
        super()._release(name, emit)
        self.pointers.discard(name)

    # -- kernels -------------------------------------------------------------------------
    def _ptr(self, name: str) -> str:
        if name not in self.pointers:
            if name in self.sched.constants:
                value = self.sched.constants[name]
                self.w.namespace[f"p_{name}"] = value.data_ptr()
            else:
                self.w.line(f"p_{name} = {name}.data_ptr()")
            self.pointers.add(name)
        return f"p_{name}"

    def _loops(self, group_name: str) -> None:
        kernel = self.kernels[group_name]
        for p in kernel.params:
            self._ptr(p.buffer)
        if self.runs:
            self.pending.append(group_name)  # called with its run (_flush_launches)
        else:
            self._call_kernel(kernel)

    def _call_kernel(self, kernel: KernelSource, *, read: bool = False) -> None:
        """``read``: its pointers are locals already (read before frees that wait)."""
        pointers = [f"p_{p.buffer}" if read else self._ptr(p.buffer) for p in kernel.params]
        sizes = [str(value_of(n)) for n in kernel.size_params]
        self.w.line(f"_k_{kernel.name}({', '.join([*pointers, *sizes])})")
        if kernel.may_fail:
            self.w.line(f"if _error.value: _raise_kernel_error({kernel.name!r})")

    def _free_emitter(self) -> Callable[[str], None]:
        # while kernels wait for their run's call, so do the frees of what they read
        return self.pending_frees.append if self.pending else self.w.line

    def _flush_launches(self) -> None:
        """Call the kernels waiting since the last extern: their run's entry point (one
        native call), else each kernel; then the frees that waited for them. A dead buffer
        goes back to the pool only after the call that reads it: another thread's graph
        could take it from there."""
        pending, self.pending = tuple(self.pending), []
        run = self.runs.get(pending)
        w = self.w
        if run is not None:
            args = [f"p_{p}" for p in run.pointers] + [str(value_of(n)) for n in run.sizes]
            call = f"_run_{run.name[len('run_') :]}({', '.join(args)})"
            if run.may_fail:
                w.line(f"_e = {call}")
                w.line(f"if _e: _raise_kernel_error({run.kernel_names!r}[_e - 1])")
            else:
                w.line(call)
        else:
            for name in pending:
                self._call_kernel(self.kernels[name], read=True)
        for line in self.pending_frees:
            w.line(line)
        self.pending_frees = []

    # -- products through oneDNN ---------------------------------------------------------
    def _extern_out(self, extern: ExternKernel) -> None:
        layouts = self._arg_layouts(extern)
        if not onednn_matmul.use_onednn(extern.kernel_name, layouts, extern.kwargs):
            super()._extern_out(extern)
        elif not self._onednn_fresh(extern):
            self._out_call(extern, onednn_matmul.RUNTIME_NAMES[extern.kernel_name])

    def _onednn_fresh(self, extern: ExternKernel) -> bool:
        """oneDNN's result (a fresh row-major tensor) becomes the buffer itself where the
        buffer is row-major at offset 0, instead of being copied into the planned storage
        (a pass over the result: up to a third of a weight gradient's product). The storage
        the plan gave it (a dead buffer's) is released here instead."""
        (out,) = extern.outputs
        size, stride, offset = triple(self.sched.layout(out.name))
        if offset != 0 or not is_contiguous(size, stride):
            return False
        plan = self.sched.allocations.get(out.name)
        if plan is not None and plan.reuses is not None and plan.reuses in self.live:
            self._release(plan.reuses, self.w.line)
        args = ", ".join(self._render_arg(a) for a in extern.args)
        fn = onednn_matmul.FRESH_NAMES[extern.kernel_name]
        self._adopt(out.name, f"{fn}({args})", fresh=True)
        return True

    def _arg_layouts(self, extern: ExternKernel) -> list[Layout | None]:
        """Each argument's layout as the call sees it (None for a non-tensor)."""
        return [
            (a.view or self.sched.layout(a.name)) if isinstance(a, TensorArg) else None
            for a in extern.args
        ]


def check_cpu(sched: Schedule) -> None:
    for name in sched.graph_inputs:
        device = sched.layout(name).device
        if device.type != "cpu":
            raise CodegenError(
                f"graph input {name} is on {device}; the C++ target runs CPU graphs only "
                "(use target='triton' for GPU graphs)"
            )


_RELAYOUT_CPU = functools.partial(relayout_input, device=torch.device("cpu"))


def runtime_namespace() -> dict[str, Any]:
    return {
        "_pool": STORAGE_POOL,
        "_empty_strided": torch.empty_strided,
        "_empty": torch.empty,
        "_as_strided": torch.as_strided,
        "_relayout": _RELAYOUT_CPU,
        "_adopt": adopt_extern_output,
        "_sequences": (tuple, list),
        "_prim_impl": PRIM_IMPLEMENTATIONS,
        **OUT_FUNCTIONS,
        **onednn_matmul.RUNTIME_FUNCTIONS,
    }
