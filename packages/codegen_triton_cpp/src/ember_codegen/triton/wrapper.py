"""The generated Python wrapper of the Triton target.

The target-neutral wrapper builder (ember_codegen/wrapper/builder.py) does the input
guards, allocation per the memory plan (reusing dead storages), extern ops through aten,
frees and outputs. This builder says what a loops group turns into (workspaces plus one
launch per kernel: the binary's launcher called directly, else ``kernel[grid](buffers...,
sizes..., XBLOCK=..)``) and binds the allocation helpers to the graph's device. Grids,
block sizes and size arguments are literals computed from static sizes, or from the binding
of the size symbols a symbolic graph's wrapper is written for (one wrapper per binding:
ember_codegen/wrapper/dynamic_wrapper.py; one for every binding: symbolic_wrapper.py), so a
call makes no host-device synchronisation and allocates the same sizes every time (what a
CUDA graph replay needs).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import torch

from ember_codegen.exc import CodegenError
from ember_codegen.wrapper.builder import WrapperBuilder
from ember_codegen.wrapper.library_calls import OUT_FUNCTIONS, PRIM_IMPLEMENTATIONS
from ember_codegen.wrapper.runtime import adopt_extern_output, relayout_input, scalars_to_device
from ember_codegen.wrapper.size_bindings import concrete, value_of
from ember_codegen.wrapper.writer import WrapperCode
from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel

from .index_printer import INT32_LIMIT
from .kernel import GroupKernels, TritonKernel
from .launch import POINTER_ALIGNMENT, DirectLaunch, alignment_check, current_stream_getter
from .template_choice import TemplateKernel
from .template_launch import TemplateSites


class TritonWrapperBuilder(WrapperBuilder):
    """Fresh buffers come from torch's caching allocator (``_empty_strided`` on the graph's
    device); products stay aten calls or matmul templates (template_launch.py)."""

    #: what the guard of a direct launch may find the binary was not specialized for (the
    #: comment on its JIT branch)
    unspecialized = "an address"

    def __init__(
        self,
        sched: Schedule,
        groups: dict[str, GroupKernels],
        templates: Sequence[TemplateKernel] = (),
        *,
        trusted_inputs: bool = False,
    ) -> None:
        super().__init__(sched, groups, trusted_inputs=trusted_inputs)  # type: ignore[arg-type]
        #: group launching a combined kernel -> the run's other groups, whose dead buffers
        #: are freed after that launch (combo.py)
        self.deferred_frees: dict[str, list[str]] = {}
        self.scratch_key = False  # `_scratch_key` is bound (split reductions' scratch)
        self.scratch_sites = 0
        self.templates = TemplateSites(templates)  # matmul templates (template_launch.py)
        self.templates.bind(sched)
        # tensors whose addresses the wrapper does not choose: checked before a direct launch
        self.foreign = set(sched.graph_inputs) | {
            out.name for g in sched if g.extern is not None for out in g.extern.outputs
        }
        for a in sched.allocations.values():  # in plan order: storages handed on in turn
            if a.reuses in self.foreign:  # an input itself, a library result's storage
                self.foreign.add(a.buffer)
        #: a buffer that is a graph input's tensor -> that input (itself for inputs)
        self.input_of = {name: name for name in sched.graph_inputs} | {
            a.buffer: a.reuses
            for a in sched.allocations.values()
            if a.in_place and a.reuses in sched.graph_inputs
        }

    def _guard_inputs(self) -> None:
        super()._guard_inputs()
        device = graph_device(self.sched)
        scalars: dict[torch.dtype, list[str]] = {}  # CPU scalars of a GPU graph (0-dim)
        for name in self.sched.graph_inputs:
            layout = self.sched.layout(name)
            if torch.device(layout.device).type != device.type:
                scalars.setdefault(layout.dtype, []).append(name)
        for names in scalars.values():  # one copy per dtype (an optimizer has hundreds)
            if len(names) == 1:
                self.w.line(f"{names[0]} = _to_graph_device({names[0]})")
            else:
                self.w.line(
                    f"{', '.join(names)}, = _scalars_to_graph_device(({', '.join(names)},))"
                )
        directs = [d for g in self.kernels.values() for k in g.kernels if (d := self._direct(k))]
        if directs:
            self.w.namespace["_current_stream"] = current_stream_getter(device)
            self.w.line("_stream = _current_stream()")
            if any(self._reuses_scratch(g) for g in self.kernels.values()):
                self.w.line("_scratch_key = (_stream, _thread_id())")
                self.scratch_key = True
        # the inputs' addresses checked once per call, not before every launch that reads
        # them (an optimizer step: ~8 per launch, 150 launches); a misaligned input sends
        # every launch to the JIT
        checked = sorted(
            {self.input_of[n] for d in directs for n in d.aligned & self.input_of.keys()}
        )
        if checked:
            self.w.line(f"_inputs_aligned = {alignment_check(checked)}")

    def _grid(self, kernel: TritonKernel) -> tuple[str, ...]:
        """The launch grid's programs, as Python source."""
        return tuple(map(str, kernel.grid()))

    def _size_checks(self, kernel: TritonKernel) -> list[str] | None:
        """Per-call conditions under which the warmed-up binary serves the size arguments
        (it took them as int32, warmed up on hints), or None where it never does."""
        if any(value_of(n) > INT32_LIMIT for n in kernel.size_params):
            return None
        return []

    def _direct(self, kernel: TritonKernel) -> DirectLaunch | None:
        """The binary's direct launch, unless the sizes or a constant's address are not what
        it was specialized for."""
        direct = kernel.direct
        if direct is None or self._size_checks(kernel) is None:
            return None
        for name in direct.aligned & set(self.sched.constants):  # addresses known now
            if self.sched.constants[name].data_ptr() % POINTER_ALIGNMENT:
                return None
        return direct

    def _launch(self, kernel: TritonKernel) -> None:
        """One launch: the binary's launcher with pre-packed arguments (launch.py) where its
        per-call checks pass, else ``kernel[grid](...)`` through the JIT."""
        w = self.w
        cfg = kernel.config
        consts = cfg.constexprs(kernel.reduction)
        args = [*kernel.params, *(str(value_of(n)) for n in kernel.size_params)]
        grid = self._grid(kernel)
        jit_args = [*args, *(f"{k}={v}" for k, v in consts.items())]
        jit_args += [f"num_warps={cfg.num_warps}", f"num_stages={cfg.num_stages}"]
        grid_text = f"({grid[0]},)" if len(grid) == 1 else f"({', '.join(grid)})"
        jit_launch = f"_k_{kernel.name}[{grid_text}]({', '.join(jit_args)})"
        direct = self._direct(kernel)
        if direct is None:
            w.line(jit_launch)
            return
        w.namespace[f"_fn_{kernel.name}"] = direct.function
        w.namespace[f"_meta_{kernel.name}"] = direct.packed_metadata
        grid_args = (*grid, "1", "1")[:3]
        kernel_args = [*args, *map(str, consts.values())]
        if direct.raw is not None:  # the compiled launch function itself (launch.raw_launch)
            w.namespace[f"_launch_{kernel.name}"] = direct.raw
            cooperative, pdl = map(str, direct.raw_flags)
            launch_args = [
                *grid_args, "_stream", f"_fn_{kernel.name}", cooperative, pdl, "None", "None",
                f"_meta_{kernel.name}", "None", "None", "None", *kernel_args,
            ]  # fmt: skip
            direct_launch = f"_launch_{kernel.name}({', '.join(launch_args)})"
        else:
            w.namespace[f"_run_{kernel.name}"] = direct.run
            launch_args = [
                *grid_args, "_stream", f"_fn_{kernel.name}", f"_meta_{kernel.name}",
                "None", "None", "None", *kernel_args,
            ]  # fmt: skip
            direct_launch = f"_run_{kernel.name}({', '.join(launch_args)})"
        checks = list(self._size_checks(kernel) or ())
        aligned = direct.aligned & self.foreign & set(kernel.params)
        if aligned & self.input_of.keys():
            checks.append("_inputs_aligned")  # (_guard_inputs)
        if aligned - self.input_of.keys():
            checks.append(alignment_check(sorted(aligned - self.input_of.keys())))
        if not checks:
            w.line(direct_launch)
            return
        w.line(f"if {' and '.join(checks)}:")
        w.line(f"    {direct_launch}")
        w.line(f"else:  # {self.unspecialized} the binary was not specialized for")
        w.line(f"    {jit_launch}")

    # matmul templates replace an extern (and its epilogue group): template_launch.py
    def _extern(self, extern: ExternKernel, dead: set[str] = frozenset()) -> None:
        if not self.templates.at_extern(self, extern):
            super()._extern(extern, dead=dead)

    def _free(self, group_name: str) -> None:
        into = getattr(self.kernels.get(group_name), "combined_into", None)
        if into is not None:  # its kernel runs in a later group's launch (combo.py)
            self.deferred_frees.setdefault(into, []).append(group_name)
            return
        self.templates.free(self, group_name, super()._free)
        for earlier in self.deferred_frees.pop(group_name, ()):
            self.templates.free(self, earlier, super()._free)

    def _allocate(self, name: str) -> None:
        self.templates.allocate(self, name, super()._allocate)

    def _loops(self, group_name: str) -> None:
        w = self.w
        if self.templates.at_loops(self, group_name):
            return
        group: GroupKernels = self.kernels[group_name]  # type: ignore[assignment]
        fresh = [
            f"_empty_strided(({ws.numel},), (1,), dtype={w.const(ws.dtype, 'dtype')})"
            for ws in group.workspaces
        ]
        if self.scratch_key and self._reuses_scratch(group):
            self._scratch_take(group, fresh)
        else:
            for ws, alloc in zip(group.workspaces, fresh, strict=True):
                w.line(f"{ws.name} = {alloc}")
        for kernel in group.kernels:
            if concrete(kernel.xnumel) == 0:
                w.line(f"# {kernel.name}: nothing to compute (empty)")
                continue
            self._launch(kernel)
        if group.workspaces:
            w.line(f"del {', '.join(ws.name for ws in group.workspaces)}")

    # -- split reductions' scratch ------------------------------------------------------
    @staticmethod
    def _reuses_scratch(group: Any) -> bool:
        return bool(getattr(group, "workspaces", None)) and all(
            isinstance(ws.numel, int) for ws in group.workspaces
        )

    def _scratch_take(self, group: GroupKernels, fresh: list[str]) -> None:
        """A split reduction's partials in the tensors its site used on the last call from
        this stream and thread (a dict get, where three allocations cost ~10 us: ResNet-50
        has one split per batch norm, forward and backward). The partial and finishing
        kernels of one call run in stream order before the next call's, so the scratch is
        free again; another stream or thread (a CUDA graph capture among them) gets its own,
        kept for good: a captured graph goes on reading the addresses it recorded."""
        w = self.w
        site = self.scratch_sites
        self.scratch_sites += 1
        names = ", ".join(ws.name for ws in group.workspaces)
        w.line(f"_w = _scratch[{site}].get(_scratch_key)")
        w.line("if _w is None:")
        w.line(f"    _w = _scratch[{site}][_scratch_key] = ({', '.join(fresh)},)")
        w.line(f"{names}, = _w")

    def _call_defaults(self) -> str:
        defaults = super()._call_defaults()
        if self.scratch_sites:
            defaults += f", _scratch=[{', '.join('{}' for _ in range(self.scratch_sites))}]"
        return defaults


def build_wrapper(
    sched: Schedule,
    groups: dict[str, GroupKernels],
    templates: Sequence[TemplateKernel] = (),
    *,
    trusted_inputs: bool = False,
) -> WrapperCode:
    return TritonWrapperBuilder(sched, groups, templates, trusted_inputs=trusted_inputs).build()


def graph_device(sched: Schedule) -> torch.device:
    """The device a graph runs on: its inputs' (all on one device), else its kernels'."""
    devices = {sched.layout(name).device for name in sched.graph_inputs}
    devices |= {g.device for g in sched if g.device is not None}
    devices = {_indexed(torch.device(d)) for d in devices}
    if len(devices) > 1:
        cuda = [d for d in devices if d.type == "cuda"]
        if len({str(d) for d in cuda}) > 1 or not cuda:
            raise CodegenError(
                f"the graph mixes devices {sorted(map(str, devices))}; the Triton target runs "
                "a graph on one device"
            )
        return cuda[0]
    return next(iter(devices)) if devices else torch.device("cpu")


def _indexed(device: torch.device) -> torch.device:
    """'cuda' and 'cuda:0' are one device when 0 is the current one (factory ops say 'cuda')."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def runtime_namespace(device: torch.device) -> dict[str, Any]:
    return {
        "_empty_strided": functools.partial(torch.empty_strided, device=device),
        "_empty": functools.partial(torch.empty, device=device),
        "_as_strided": torch.as_strided,
        "_relayout": functools.partial(relayout_input, device=device, moves_scalars=True),
        "_to_graph_device": functools.partial(torch.Tensor.to, device=device, non_blocking=True),
        "_scalars_to_graph_device": functools.partial(scalars_to_device, device=device),
        "_adopt": adopt_extern_output,
        "_sequences": (tuple, list),
        "_thread_id": threading.get_ident,
        "_prim_impl": PRIM_IMPLEMENTATIONS,
        **OUT_FUNCTIONS,
    }
