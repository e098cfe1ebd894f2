"""The generated Python wrapper of the Triton target.

The C++ target's wrapper (cpp/emit/wrapper.py) already does the target-neutral work:
input guards, allocation per the memory plan (reusing dead storages), extern ops through
aten, frees, outputs. This builder only changes what a loops group turns into (workspaces
plus one launch per kernel, ``kernel[grid](buffers..., sizes..., XBLOCK=..)``) and binds
the allocation helpers to the graph's device. Grids, block sizes and size arguments are
literals computed from static sizes, or from the binding of the size symbols a symbolic
graph's wrapper is written for (cpp/emit/dynamic_wrapper.py: one wrapper per binding), so a
call makes no host-device synchronisation and allocates the same sizes every time (what a
CUDA graph replay needs).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from ember_codegen.cpp.emit.size_bindings import concrete, value_of
from ember_codegen.cpp.emit.wrapper import (
    OUT_FUNCTIONS,
    PRIM_IMPLEMENTATIONS,
    WrapperBuilder,
    WrapperCode,
)
from ember_codegen.exc import CodegenError
from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel

from .index_printer import INT32_LIMIT
from .kernel import GroupKernels, TritonKernel
from .launch import POINTER_ALIGNMENT, DirectLaunch, alignment_check, current_stream_getter
from .template_choice import TemplateKernel
from .template_launch import TemplateSites


class TritonWrapperBuilder(WrapperBuilder):
    pool_storages = False  # GPU memory comes from torch's caching allocator
    onednn_matmuls = False  # its namespace has no oneDNN calls; products stay mm or templates

    def __init__(
        self,
        sched: Schedule,
        groups: dict[str, GroupKernels],
        templates: Sequence[TemplateKernel] = (),
    ) -> None:
        super().__init__(sched, groups)  # type: ignore[arg-type]
        self.templates = TemplateSites(templates)  # matmul templates (template_launch.py)
        self.templates.bind(sched)
        # tensors whose addresses the wrapper does not choose: checked before a direct launch
        self.foreign = set(sched.graph_inputs) | {
            out.name for g in sched if g.extern is not None for out in g.extern.outputs
        }

    def _guard_inputs(self) -> None:
        super()._guard_inputs()
        device = graph_device(self.sched)
        for name in self.sched.graph_inputs:  # CPU scalars of a GPU graph (0-dim tensors)
            if torch.device(self.sched.layout(name).device).type != device.type:
                self.w.line(f"{name} = _to_graph_device({name})")
        if any(self._direct(k) for g in self.kernels.values() for k in g.kernels):
            self.w.namespace["_current_stream"] = current_stream_getter(device)
            self.w.line("_stream = _current_stream()")

    def _direct(self, kernel: TritonKernel) -> DirectLaunch | None:
        direct = kernel.direct
        if direct is None:
            return None
        if any(value_of(n) > INT32_LIMIT for n in kernel.size_params):
            return None  # the binary took its size arguments as int32 (warmed up on hints)
        for name in direct.aligned & set(self.sched.constants):  # addresses known now
            if self.sched.constants[name].data_ptr() % POINTER_ALIGNMENT:
                return None
        return direct

    def _launch(self, kernel: TritonKernel) -> None:
        w = self.w
        cfg = kernel.config
        consts = cfg.constexprs(kernel.reduction)
        args = [*kernel.params, *(str(value_of(n)) for n in kernel.size_params)]
        jit_args = [*args, *(f"{k}={v}" for k, v in consts.items())]
        jit_args += [f"num_warps={cfg.num_warps}", f"num_stages={cfg.num_stages}"]
        jit_launch = f"_k_{kernel.name}[{kernel.grid()}]({', '.join(jit_args)})"
        direct = self._direct(kernel)
        if direct is None:
            w.line(jit_launch)
            return
        w.namespace[f"_run_{kernel.name}"] = direct.run
        w.namespace[f"_fn_{kernel.name}"] = direct.function
        w.namespace[f"_meta_{kernel.name}"] = direct.packed_metadata
        grid = (*kernel.grid(), 1, 1)[:3]
        launch_args = [
            *map(str, grid), "_stream", f"_fn_{kernel.name}", f"_meta_{kernel.name}",
            "None", "None", "None", *args, *map(str, consts.values()),
        ]  # fmt: skip
        direct_launch = f"_run_{kernel.name}({', '.join(launch_args)})"
        checked = sorted(direct.aligned & self.foreign & set(kernel.params))
        if not checked:
            w.line(direct_launch)
            return
        w.line(f"if {alignment_check(checked)}:")
        w.line(f"    {direct_launch}")
        w.line("else:  # an address the binary was not specialized for")
        w.line(f"    {jit_launch}")

    # matmul templates replace an extern (and its epilogue group): template_launch.py
    def _extern(self, extern: ExternKernel, dead: set[str] = frozenset()) -> None:
        if not self.templates.at_extern(self, extern):
            super()._extern(extern, dead=dead)

    def _free(self, group_name: str) -> None:
        self.templates.free(self, group_name, super()._free)

    def _allocate(self, name: str) -> None:
        self.templates.allocate(self, name, super()._allocate)

    def _loops(self, group_name: str) -> None:
        w = self.w
        if self.templates.at_loops(self, group_name):
            return
        group: GroupKernels = self.kernels[group_name]  # type: ignore[assignment]
        for ws in group.workspaces:
            dtype = w.const(ws.dtype, "dtype")
            w.line(f"{ws.name} = _empty_strided(({ws.numel},), (1,), dtype={dtype})")
        for kernel in group.kernels:
            if concrete(kernel.xnumel) == 0:
                w.line(f"# {kernel.name}: nothing to compute (empty)")
                continue
            self._launch(kernel)
        if group.workspaces:
            w.line(f"del {', '.join(ws.name for ws in group.workspaces)}")


def build_wrapper(
    sched: Schedule, groups: dict[str, GroupKernels], templates: Sequence[TemplateKernel] = ()
) -> WrapperCode:
    return TritonWrapperBuilder(sched, groups, templates).build()


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
        "_relayout": functools.partial(relayout_input, device=device),
        "_to_graph_device": functools.partial(torch.Tensor.to, device=device, non_blocking=True),
        "_adopt": adopt_extern_output,
        "_sequences": (tuple, list),
        "_prim_impl": PRIM_IMPLEMENTATIONS,
        **OUT_FUNCTIONS,
    }


def relayout_input(
    t: torch.Tensor,
    position: int,
    size: tuple,
    stride: tuple,
    dtype: torch.dtype,
    *,
    device: torch.device,
) -> torch.Tensor:
    """An input whose layout differs from the example the graph was built for: a wrong
    shape, dtype or device raises; other strides are copied to the expected layout."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"compiled graph input {position}: expected a tensor, got {type(t)}")
    if tuple(t.shape) != size or t.dtype != dtype:
        raise CodegenError(
            f"compiled graph input {position} is {t.dtype}{list(t.shape)}, but the graph was "
            f"compiled for {dtype}{list(size)}; recompile for these inputs"
        )
    if t.device.type != device.type and t.dim() > 0:
        raise CodegenError(f"compiled graph input {position} is on {t.device}, expected {device}")
    if all(n <= 1 or a == b for n, a, b in zip(size, t.stride(), stride, strict=True)):
        return t
    return torch.empty_strided(size, stride, dtype=dtype, device=t.device).copy_(t)


def adopt_extern_output(
    t: torch.Tensor, size: tuple, stride: tuple, offset: int, dtype: torch.dtype
) -> torch.Tensor:
    """An extern kernel's result as the buffer: as is when it has the buffer's layout, else
    copied (on its device) into a fresh tensor that has it."""
    if (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype) == (size, stride, offset, dtype):
        return t
    numel = (
        0 if 0 in size else offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1
    )
    out = torch.empty(max(numel, 0), dtype=dtype, device=t.device).as_strided(size, stride, offset)
    return out.copy_(t)
