"""Matmul template vs aten: plan a template per qualifying extern, benchmark, choose.

``EMBER_TRITON_MATMUL`` (or ``compile_graph(..., matmul=...)``) picks the policy:

* ``auto`` (default): only under max-autotune, benchmark (a) the aten extern plus the
  epilogue group's kernels against (b) the template with the epilogue fused, for a few tile
  configurations; the faster wins. The decision is cached on disk under
  ``<cache>/triton/autotune/<key>.matmul.json`` (key: template source, shapes, dtypes, device
  name, candidates) and logged on ``ember.autotune`` with the timings;
* ``template``: always the template (first configuration, no benchmark), for tests;
* ``aten``: never.

Benchmarks run on scratch buffers with the real layouts (random floats).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_map

from ember_codegen.cache import atomic_write, content_key, ensure_private_dir
from ember_codegen.exc import CodegenError
from ember_codegen.wrapper.library_calls import library_call
from ember_inductor_ir import KernelGroup, Schedule
from ember_inductor_ir.extern import TensorArg

from .autotune import launcher, time_ms
from .cache import interpreting, triton_root
from .epilogue import EpilogueBuilder, find_epilogue
from .kernel import GroupKernels
from .matmul_template import (
    MatmulSpec,
    NotATemplate,
    TemplateConfig,
    allow_tf32,
    matmul_spec,
    needs_int64,
    render_template,
    template_configs,
)

log = logging.getLogger("ember.autotune")

POLICIES = ("auto", "template", "aten")


@dataclass
class TemplateKernel:
    """One template kernel: replaces ``extern_group`` (and ``epilogue_group``, fused)."""

    name: str
    code: str
    params: list[str]  # buffer names, in argument order
    spec: MatmulSpec
    extern_group: str
    epilogue_group: str | None
    store_out: bool  # the matmul output is stored too (read elsewhere)
    configs: list[TemplateConfig]
    config: TemplateConfig

    def grid(self, config: TemplateConfig | None = None) -> tuple[int, int]:
        return (config or self.config).grid(self.spec)

    def launch_kwargs(self, config: TemplateConfig | None = None) -> dict[str, int]:
        config = config or self.config
        return {**config.constexprs(self.spec), "num_warps": config.num_warps,
                "num_stages": config.num_stages}  # fmt: skip


def matmul_policy(option: str | None = None) -> str:
    policy = option or os.environ.get("EMBER_TRITON_MATMUL", "auto") or "auto"
    if policy not in POLICIES:
        raise CodegenError(
            f"EMBER_TRITON_MATMUL / matmul= must be one of {POLICIES}, got {policy!r}"
        )
    return policy


def _read_elsewhere(sched: Schedule, name: str, epilogue: KernelGroup | None) -> bool:
    if any(spec.name == name for spec in sched.graph_outputs):
        return True
    return any(name in g.reads for g in sched if g is not epilogue)


def plan_templates(sched: Schedule, policy: str, autotune: bool) -> list[TemplateKernel]:
    """A template kernel for every extern the template can run (none unless the policy
    forces it or autotune may choose it)."""
    if policy == "aten" or (policy == "auto" and not autotune):
        return []
    plans: list[TemplateKernel] = []
    claimed: set[str] = set()  # a group is the epilogue of one template at most
    for position, group in enumerate(sched):
        if group.extern is None:
            continue
        try:
            spec = matmul_spec(group.extern, sched)
        except NotATemplate as reason:
            if group.extern.kernel_name in ("mm", "bmm", "addmm"):
                log.info("matmul template: %s stays with aten: %s", group.name, reason)
            continue
        epilogue, mapping = find_epilogue(sched, position, spec)
        if epilogue is not None and epilogue.name in claimed:
            log.info("matmul template %s: %s is already another template's epilogue",
                     spec.out, epilogue.name)  # fmt: skip
            epilogue, mapping = None, {}
        if epilogue is not None:
            claimed.add(epilogue.name)
        store_out = epilogue is None or _read_elsewhere(sched, spec.out, epilogue)
        int64 = needs_int64(spec, sched)
        builder = EpilogueBuilder(spec, sched, epilogue, mapping, store_out=store_out,
                                  int64=int64)  # fmt: skip
        lines = builder.build()
        params = list(dict.fromkeys([spec.a.buffer, spec.b.buffer, *builder.params]))
        name = f"{group.name}_template"
        code = render_template(name, spec, params, lines, int64=int64, tf32=allow_tf32())
        configs = template_configs(spec, interpreting())
        plans.append(TemplateKernel(name, code, params, spec, group.name,
                                    epilogue.name if epilogue else None, store_out, configs,
                                    configs[0]))  # fmt: skip
    return plans


# -- benchmark and choose -------------------------------------------------------------------
def _scratch(sched: Schedule, names: set[str], device: torch.device) -> dict[str, torch.Tensor]:
    out = {}
    for name in names:
        layout = sched.layout(name)
        numel = max(layout.storage_numel(), 1)
        if layout.dtype.is_floating_point:
            storage = torch.randn(numel, device=device).to(layout.dtype)
        else:
            storage = torch.zeros(numel, dtype=layout.dtype, device=device)
        size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
        out[name] = storage.as_strided(size, stride, int(layout.offset))
    return out


def _aten_runner(plan: TemplateKernel, sched: Schedule, kernels: dict[str, GroupKernels],
                 module: Any, buffers: dict[str, torch.Tensor]) -> Any:  # fmt: skip
    group = next(g for g in sched if g.name == plan.extern_group)
    extern = group.extern
    assert extern is not None
    fn = library_call(extern)

    def tensor(arg: Any) -> Any:
        if not isinstance(arg, TensorArg):
            return arg
        base = buffers[arg.name]
        if arg.view is None:
            return base
        view = arg.view
        return torch.as_strided(base, [int(s) for s in view.size],
                                [int(s) for s in view.stride], int(view.offset))  # fmt: skip

    args, kwargs = tree_map(tensor, (list(extern.args), dict(extern.kwargs)))
    launches = []
    if plan.epilogue_group is not None:
        for kernel in kernels[plan.epilogue_group].kernels:
            if kernel.xnumel:
                kernel_args = [buffers[p] for p in kernel.params]
                launches.append(launcher(getattr(module, kernel.name), kernel, kernel_args,
                                         kernel.config))  # fmt: skip

    def run() -> None:
        fn(*args, **kwargs)
        for launch in launches:
            launch()

    return run


def _cache_path(plan: TemplateKernel, aten_code: list[str], device: torch.device) -> Path:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    spec = plan.spec
    key = content_key(["ember-triton-matmul", plan.code, spec.describe(), repr(spec), name,
                       repr(plan.configs), *aten_code])  # fmt: skip
    return ensure_private_dir(triton_root() / "autotune") / f"{key}.matmul.json"


def choose(
    plan: TemplateKernel,
    module: Any,
    sched: Schedule,
    kernels: dict[str, GroupKernels],
    device: torch.device,
) -> bool:
    """Benchmark ``plan`` against aten (+ its epilogue kernels); True when the template
    wins (``plan.config`` is then the fastest configuration). Cached on disk."""
    epilogue = kernels.get(plan.epilogue_group) if plan.epilogue_group else None
    aten_code = [k.code for k in epilogue.kernels] if epilogue else []
    path = _cache_path(plan, aten_code, device)
    key = path.name.removesuffix(".matmul.json")
    if path.exists():
        try:
            entry = json.loads(path.read_text())
            if entry["key"] != key:  # another key's decision copied or moved here
                raise KeyError("key")
            plan.config = TemplateConfig(**entry["config"])
            log.info("matmul %s: %s (cached decision %s)", plan.spec.describe(), entry["choice"],
                     path.name)  # fmt: skip
            return entry["choice"] == "template"
        except (ValueError, TypeError, KeyError):
            log.warning("ignoring a corrupt or another key's matmul decision %s", path)
    names = set(plan.params)
    if epilogue is not None:
        names |= {p for k in epilogue.kernels for p in k.params}
    extern_group = next(g for g in sched if g.name == plan.extern_group)
    names |= {a.name for a in extern_group.extern.tensor_args()}  # type: ignore[union-attr]
    buffers = _scratch(sched, names, device)
    aten_ms = time_ms(_aten_runner(plan, sched, kernels, module, buffers), device)
    fn = getattr(module, plan.name)
    args = [buffers[p] for p in plan.params]
    timings: list[tuple[float, TemplateConfig]] = []
    for config in plan.configs:
        kwargs = plan.launch_kwargs(config)
        grid = plan.grid(config)
        try:
            run = lambda grid=grid, kwargs=kwargs: fn[grid](*args, **kwargs)  # noqa: E731
            timings.append((time_ms(run, device), config))
        except Exception as exc:  # a configuration that does not compile (shared memory...)
            log.info("matmul template %s: %s failed: %s", plan.name, config.describe(), exc)
    best_ms, best = min(timings, key=lambda t: t[0]) if timings else (float("inf"), plan.config)
    choice = "template" if best_ms < aten_ms else "aten"
    plan.config = best
    log.info(
        "matmul %s: %s wins (aten%s %.4f ms, template %.4f ms with %s; %d configs)",
        plan.spec.describe(), choice, " + epilogue" if epilogue else "", aten_ms, best_ms,
        best.describe(), len(timings),
    )  # fmt: skip
    entry = {"key": key, "choice": choice, "config": asdict(best), "aten_ms": aten_ms,
             "template_ms": {c.describe(): ms for ms, c in timings}}  # fmt: skip
    atomic_write(path, json.dumps(entry, indent=1).encode())
    return choice == "template"


def choose_templates(
    plans: list[TemplateKernel],
    module: Any,
    sched: Schedule,
    kernels: dict[str, GroupKernels],
    device: torch.device,
    policy: str,
) -> list[TemplateKernel]:
    """The plans that run: all of them under ``template``, the benchmark winners otherwise."""
    if policy == "template":
        for plan in plans:
            log.info("matmul %s: template forced (%s)", plan.spec.describe(),
                     plan.config.describe())  # fmt: skip
        return list(plans)
    return [p for p in plans if choose(p, module, sched, kernels, device)]
