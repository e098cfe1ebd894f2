"""Schedule -> Triton kernel module + Python wrapper -> callable graph."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ember_codegen.cache import atomic_write, content_key
from ember_codegen.exc import CodegenError
from ember_codegen.workers import progress_counter, timed_job
from ember_codegen.wrapper.dynamic_wrapper import DynamicWrapper, SizeBinder
from ember_codegen.wrapper.runtime import call_without_autocast
from ember_codegen.wrapper.size_bindings import bound, concrete
from ember_events import stage
from ember_inductor_ir import DynamicShapeUnsupported, Schedule

from .autotune import (
    autotune_kernel,
    launcher,
    layout_record,
    scratch_args,
    scratch_args_from,
)
from .cache import configure_triton_cache, interpreting, load_module, module_source, triton_root
from .combo import combine_groups
from .kernel import GroupKernels, TritonKernel, build_group
from .launch import POINTER_ALIGNMENT, direct_launch, direct_launches_enabled
from .prebuild import (
    BuildJob,
    build_all,
    pointer_arg,
    prebuild_enabled,
    start_build_workers,
    worker_count,
)
from .symbolic_wrapper import symbolic_triton_call
from .target import TRITON_TARGET
from .template_choice import TemplateKernel, choose_templates, matmul_policy, plan_templates
from .wrapper import TritonWrapperBuilder, build_wrapper, graph_device, runtime_namespace

#: threads warming the kernels up in this process (compile_parallel)
WARM_UP_THREADS = 8

output_code_log = logging.getLogger("ember.output_code")
perf_log = logging.getLogger("ember.perf")


class CompiledGraph:
    """``compiled(inputs: list[Tensor]) -> list[Tensor]``; the generated code stays readable
    on ``triton_source`` (the kernel module, also ``source``) and ``wrapper_source``."""

    #: the code generator that wrote it (its capability record: triton/target.py)
    target = "triton"

    def __init__(
        self,
        call: Any,
        triton_source: str,
        wrapper_source: str,
        groups: Sequence[GroupKernels],
        fallback_counts: dict[str, int],
        device: torch.device,
        module_path: Path,
        templates: Sequence[TemplateKernel] = (),
    ) -> None:
        self._call = call
        self.triton_source = triton_source
        self.wrapper_source = wrapper_source
        self.groups = list(groups)
        self.fallback_counts = dict(fallback_counts)
        self.device = device
        self.module_path = module_path
        #: matmul templates that replaced an extern (and its epilogue group)
        self.templates = list(templates)
        #: each kernel parameter's layout record (autotune.layout_record): what a cached
        #: graph needs to warm its binaries up again
        self.launch_layouts: dict[str, list] = {}
        #: symbolic sizes: the size symbols' example values (the layouts' and warm-up's)
        self.size_hints: dict[str, int] = {}

    @property
    def source(self) -> str:
        """The kernels' source (the Triton module)."""
        return self.triton_source

    @property
    def kernels(self) -> list[TritonKernel]:
        replaced = {t.epilogue_group for t in self.templates}
        return [k for g in self.groups if g.name not in replaced for k in g.kernels]

    @property
    def kernel_count(self) -> int:
        """Triton kernels launched per call (a split reduction counts two, a matmul
        template with its fused epilogue one, a combined launch one: combo.py)."""
        return len(self.kernels) + len(self.templates)

    @property
    def combined_kernels(self) -> int:
        """Groups' kernels that run inside a combined launch (combo.py) rather than alone."""
        combos = sum(k.kind == "combo" for k in self.kernels)
        return combos + sum(not g.kernels for g in self.groups) if combos else 0

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return call_without_autocast(self._call, inputs)


MODES = (None, "default", "max-autotune", "reduce-overhead", "max-autotune-no-cudagraphs")


def compile_triton(
    sched: Schedule,
    *,
    autotune: bool = False,
    mode: str | None = None,
    matmul: str | None = None,
    trusted_inputs: bool = False,
    **unknown: Any,
) -> CompiledGraph:
    """Compile a schedule to Triton. ``autotune=True`` (or ``mode="max-autotune"``)
    benchmarks a few launch configurations per kernel and caches the winners, and lets a
    matmul template with its epilogue fused compete with aten. ``matmul``: "auto" (that),
    "template" (always the template) or "aten" (never); default EMBER_TRITON_MATMUL.
    ``trusted_inputs``: the caller guarantees the inputs' sizes, dtypes and devices (a
    tracer's guards); the wrapper then checks only their strides (WrapperBuilder)."""
    if unknown:
        raise CodegenError(
            f"compile_graph(target='triton') got unknown options {sorted(unknown)}; "
            "known: autotune, mode, matmul, trusted_inputs"
        )
    if mode not in MODES:
        raise CodegenError(f"unknown mode {mode!r} for the triton target; known: {MODES[1:]}")
    start = time.perf_counter()
    configure_triton_cache()
    autotune = autotune or mode in ("max-autotune", "max-autotune-no-cudagraphs")
    device = graph_device(sched)
    if device.type == "cuda":
        start_build_workers()  # where the umbrella did not yet: they import while we generate
    policy = matmul_policy(matmul)
    if sched.shape_env is not None:
        # symbolic sizes: kernels take them as arguments (symbolic.py); the matmul template
        # and autotuning decide on static sizes and are not used
        try:
            return _compile_symbolic(sched, device)
        except TypeError as exc:  # emission that needs a static size met a symbol
            raise DynamicShapeUnsupported(f"Triton emission needs static sizes: {exc}") from exc
    groups = [build_group(g, sched) for g in sched if g.extern is None]
    templates = plan_templates(sched, policy, autotune)
    epilogues = {t.epilogue_group for t in templates}
    groups = combine_groups(sched, groups, combine_policy(), epilogues)
    source = module_source(
        [k.code for g in groups for k in g.kernels] + [t.code for t in templates]
    )
    generated = time.perf_counter()
    module, path = load_module(source)
    if autotune:
        _autotune(groups, module, sched, device)
    by_name = {g.name: g for g in groups}
    templates = choose_templates(templates, module, sched, by_name, device, policy)
    replaced = {t.epilogue_group for t in templates}
    launched = [g for g in groups if g.name not in replaced]
    layouts = {
        p: layout_record(sched, p)
        for g in launched
        for k in g.kernels
        for p in k.params
        if p not in {ws.name for ws in g.workspaces}
    }
    if device.type == "cuda" and not interpreting():
        with stage("triton_build"):
            compile_parallel(launched, module, layouts, device)
    wrapper = build_wrapper(sched, by_name, templates, trusted_inputs=trusted_inputs)
    namespace = {**runtime_namespace(device), **wrapper.namespace}
    for kernel in (k for g in groups for k in g.kernels):
        namespace[f"_k_{kernel.name}"] = getattr(module, kernel.name)
    for template in templates:
        namespace[f"_k_{template.name}"] = getattr(module, template.name)
    wrapper_path = _exec_wrapper(source, wrapper.source, namespace)
    output_code_log.info("triton kernels %s:\n%s", path, source)
    output_code_log.info("wrapper %s:\n%s", wrapper_path, wrapper.source)
    perf_log.info(
        "compile_graph(triton): %d kernels, codegen %.3fs, load/tune/compile %.3fs",
        sum(len(g.kernels) for g in groups), generated - start, time.perf_counter() - generated,
    )  # fmt: skip
    compiled = CompiledGraph(
        namespace["call"], source, wrapper.source, groups, sched.fallback_counts, device, path,
        templates,
    )  # fmt: skip
    compiled.launch_layouts = layouts
    return compiled


def combine_policy() -> Any:
    """The target's rule for combined launches (combo.py), or None (every kernel launched
    alone) under EMBER_TRITON_COMBINE=0."""
    if os.environ.get("EMBER_TRITON_COMBINE", "1") == "0":
        return None
    return TRITON_TARGET.combine


def _exec_wrapper(source: str, wrapper_source: str, namespace: dict) -> Path:
    """Run the wrapper's source in ``namespace`` from a content-keyed file (tracebacks and
    EMBER_LOGS point there); returns that file's path."""
    key = content_key(["ember-triton-wrapper", source, wrapper_source])
    path = triton_root() / "kernels" / key[:2] / f"{key}.wrapper.py"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        atomic_write(path, wrapper_source.encode())
    exec(compile(wrapper_source, str(path), "exec"), namespace)
    return path


def _compile_symbolic(sched: Schedule, device: torch.device) -> CompiledGraph:
    """One kernel module for every size: the size symbols are kernel arguments, read from
    each call's inputs (SizeBinder) by one wrapper for every binding (symbolic_wrapper.py),
    or, where that wrapper would need concrete sizes, by a wrapper written per binding
    (DynamicWrapper, ember_codegen/wrapper's machinery with the Triton wrapper builder)."""
    start = time.perf_counter()
    groups = [build_group(g, sched) for g in sched if g.extern is None]
    kernels = [k for g in groups for k in g.kernels]
    source = module_source([k.code for k in kernels])
    module, path = load_module(source)
    by_name = {g.name: g for g in groups}
    binder = SizeBinder(sched, kernels)
    hints = binder.hints()
    with bound(hints):  # the example inputs' binding: warm-up compile and the shown wrapper
        layouts = {p: layout_record(sched, p) for g in groups for k in g.kernels for p in k.params}
        if device.type == "cuda" and not interpreting():
            compile_parallel(groups, module, layouts, device, hints)
        shown = build_wrapper(sched, by_name)
    namespace = runtime_namespace(device)
    for kernel in kernels:
        namespace[f"_k_{kernel.name}"] = getattr(module, kernel.name)
    symbolic = symbolic_triton_call(sched, by_name, namespace, binder)
    if symbolic is not None:  # one wrapper for every binding
        call, shown = symbolic
        output_code_log.info("wrapper (every size):\n%s", shown.source)
    else:  # the fallback: one wrapper per binding, same kernels

        def build() -> Any:
            return TritonWrapperBuilder(sched, by_name).build()

        call = DynamicWrapper(sched, build, namespace, binder)
    output_code_log.info("triton kernels %s (symbolic sizes):\n%s", path, source)
    perf_log.info(
        "compile_graph(triton, symbolic): %d kernels in %.3fs",
        len(kernels), time.perf_counter() - start,
    )  # fmt: skip
    compiled = CompiledGraph(
        call, source, shown.source, groups, sched.fallback_counts, device, path
    )
    compiled.launch_layouts = layouts
    compiled.size_hints = hints
    return compiled


def _rnumel(sched: Schedule, group_name: str) -> int:
    group = next(g for g in sched if g.name == group_name)
    n = 1
    for s in group.reduction_sizes:
        n *= int(s)
    return n


def _autotune(groups: list[GroupKernels], module: Any, sched: Schedule, device: Any) -> None:
    for group in groups:
        rnumel = _rnumel(sched, group.name)
        for kernel in group.kernels:
            if kernel.kind == "combo":  # its parts keep their heuristic blocks (combo.py)
                continue
            args = scratch_args(kernel, group, sched, device)
            fn = getattr(module, kernel.name)
            tile = kernel.rnumel if kernel.rnumel is not None else rnumel  # a tiled kernel's
            kernel.config = autotune_kernel(fn, kernel, args, tile, device)


def compile_parallel(
    groups: list[GroupKernels],
    module: Any,
    layouts: dict[str, list],
    device: torch.device,
    sizes: dict[str, int] | None = None,
) -> None:
    """Compile every kernel for its launch signature, so the first call only launches:
    worker processes build the binaries into Triton's cache (prebuild.py), then a thread pool
    warms each kernel up here (a cache hit, or the build itself where no worker made it);
    each binary then gets its direct launch (launch.py). `layouts`: each parameter's layout record;
    `sizes`: the size symbols' values to warm up with (their binary serves every value:
    size arguments are not specialized)."""
    sizes = sizes or {}

    def warm(item: tuple[GroupKernels, TritonKernel, tuple[int]]) -> None:
        group, kernel, grid = item
        args = [*scratch_args_from(kernel, group, layouts, device)]
        args += [sizes[n] for n in kernel.size_params]
        cfg = kernel.config
        binary = getattr(module, kernel.name).warmup(
            *args,
            grid=grid,
            **cfg.constexprs(kernel.reduction),
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
        if direct_launches_enabled():
            kernel.direct = direct_launch(binary, [*kernel.params, *kernel.size_params], args)

    # kernels over nothing are never launched (the wrapper skips them): nothing to compile
    with bound(sizes):  # grids of symbolic kernels: at the warm-up sizes (threads below
        # do not see this binding)
        items = [(g, k, k.grid()) for g in groups for k in g.kernels if concrete(k.xnumel) > 0]
    if not items:
        return
    # one build per function and launch signature: a kernel the module aliases to an
    # earlier one (shared_kernels.py) with the same signature warms up after it, a hit
    firsts: dict[tuple, tuple[GroupKernels, TritonKernel, tuple[int]]] = {}
    for item in items:
        firsts.setdefault(_build_key(module, item[0], item[1], layouts, sizes), item)
    builds = list(firsts.values())
    if prebuild_enabled() and len(builds) > 1:
        _prebuild([(g, k) for g, k, _ in builds], module, layouts, sizes)
    tick = progress_counter(len(items))  # each built binary reported (the progress line)

    def warm_and_report(item: tuple[GroupKernels, TritonKernel, tuple[int]]) -> None:
        timed_job(lambda: warm(item), f"build {item[1].name}")()
        tick()

    # a build here holds the GIL for most of its time: 16 threads were no faster than 8
    # (tools/gpu/compile_profile.py), and after the workers most warm-ups are cache hits
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=min(WARM_UP_THREADS, len(builds))
    ) as pool:
        list(pool.map(warm_and_report, builds))
    chosen = {id(item) for item in builds}
    for item in items:  # the shared ones: their binary is in the function's own cache now
        if id(item) not in chosen:
            warm_and_report(item)


def _build_key(
    module: Any,
    group: GroupKernels,
    kernel: TritonKernel,
    layouts: dict[str, list],
    sizes: dict[str, int],
) -> tuple:
    """What decides a kernel's binary: its function object (shared by aliases), the dtypes
    and alignment of its pointers, its size arguments and its launch config."""
    args = json.dumps(_stand_in_args(kernel, group, layouts, sizes))
    config = kernel.config
    constexprs = tuple(sorted(config.constexprs(kernel.reduction).items()))
    return (id(getattr(module, kernel.name)), args, constexprs, config.num_warps, config.num_stages)


def _prebuild(
    kernels: list[tuple[GroupKernels, TritonKernel]],
    module: Any,
    layouts: dict[str, list],
    sizes: dict[str, int],
) -> None:
    """The kernels built in worker processes (prebuild.py) into Triton's cache, where the
    warm-up below then finds them; what a worker could not build is built there as before."""
    from triton.runtime import driver

    target = driver.active.get_current_target()
    jobs = [
        BuildJob(
            path=module.__file__,
            module=module.__name__,
            kernel=kernel.name,
            args=_stand_in_args(kernel, group, layouts, sizes),
            constexprs=kernel.config.constexprs(kernel.reduction),
            num_warps=kernel.config.num_warps,
            num_stages=kernel.config.num_stages,
            target=[target.backend, target.arch, target.warp_size],
            cache_dir=os.environ["TRITON_CACHE_DIR"],
        )
        for group, kernel in kernels
    ]
    start = time.perf_counter()
    built, failures = build_all(jobs, worker_count())
    perf_log.info(
        "triton prebuild: %d of %d kernels in worker processes in %.3fs%s",
        built, len(jobs), time.perf_counter() - start,
        f"; not built there: {failures[:3]}" if failures else "",
    )  # fmt: skip


def _stand_in_args(
    kernel: TritonKernel, group: GroupKernels, layouts: dict[str, list], sizes: dict[str, int]
) -> list:
    """The warm-up's arguments (scratch_args_from's tensors, then the sizes) as a worker
    rebuilds them: each tensor's dtype and whether its address is 16-byte aligned (a fresh
    storage is; a view is where its offset keeps it so)."""
    workspaces = {ws.name: ws for ws in group.workspaces}
    args: list = []
    for name in kernel.params:
        if name in workspaces:
            args.append(pointer_arg(str(workspaces[name].dtype).split(".")[-1], True))
            continue
        _, _, offset, dtype, _ = layouts[name]
        itemsize = getattr(torch, dtype).itemsize
        args.append(pointer_arg(dtype, offset * itemsize % POINTER_ALIGNMENT == 0))
    return args + [sizes[n] for n in kernel.size_params]


__all__ = ["CompiledGraph", "compile_triton", "launcher"]
