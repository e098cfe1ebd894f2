"""max-autotune: benchmark a few launch configurations per kernel, keep the fastest.

Benchmarks run on scratch buffers (zero-filled, so indirect indices stay in range) with
the kernel's real layouts. Winners are cached on disk per kernel source, kind, sizes and
device under ``<cache>/triton/autotune/<key>.json`` (``{"key", "config"}``, atomic writes;
an entry naming another key is ignored and re-tuned), so a second process skips the
benchmark. On a GPU the timer is ``triton.testing.do_bench``; under the CPU
interpreter a wall-clock median (only the mechanism is tested there, not the choice).
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ember_codegen.cache import atomic_write, content_key, ensure_private_dir
from ember_codegen.wrapper.size_bindings import concrete
from ember_inductor_ir import Schedule

from .cache import interpreting, triton_root
from .heuristics import LaunchConfig, candidate_configs, split_candidates
from .kernel import GroupKernels, TritonKernel

log = logging.getLogger("ember.autotune")


def layout_record(sched: Schedule, name: str) -> list:
    """A buffer's layout as plain data: [size, stride, offset, dtype name, storage numel]."""
    layout = sched.layout(name)  # symbolic sizes: the current binding's values
    return [
        [concrete(s) for s in layout.size],
        [concrete(s) for s in layout.stride],
        concrete(layout.offset),
        str(layout.dtype).removeprefix("torch."),
        concrete(layout.storage_numel()),
    ]


def scratch_args(
    kernel: TritonKernel, group: GroupKernels, sched: Schedule, device: torch.device
) -> list[torch.Tensor]:
    """Zero-filled tensors with each parameter's layout (workspaces: flat)."""
    workspaces = {ws.name for ws in group.workspaces}
    layouts = {p: layout_record(sched, p) for p in kernel.params if p not in workspaces}
    return scratch_args_from(kernel, group, layouts, device)


def scratch_args_from(
    kernel: TritonKernel, group: GroupKernels, layouts: dict[str, list], device: torch.device
) -> list[torch.Tensor]:
    """`scratch_args` from layout records (what a cached compiled graph keeps)."""
    workspaces = {ws.name: ws for ws in group.workspaces}
    args = []
    for name in kernel.params:
        if name in workspaces:
            ws = workspaces[name]
            args.append(torch.zeros(ws.numel, dtype=ws.dtype, device=device))
            continue
        size, stride, offset, dtype, numel = layouts[name]
        storage = torch.zeros(max(numel, 1), dtype=getattr(torch, dtype), device=device)
        args.append(storage.as_strided(size, stride, offset))
    return args


def launcher(fn: Any, kernel: TritonKernel, args: list, config: LaunchConfig) -> Callable:
    consts = config.constexprs(kernel.reduction)
    grid = kernel.grid(config)
    return lambda: fn[grid](
        *args, **consts, num_warps=config.num_warps, num_stages=config.num_stages
    )


def _time(run: Callable[[], Any], device: torch.device) -> float:
    if device.type == "cuda" and not interpreting():
        from triton.testing import do_bench

        return float(do_bench(run, warmup=5, rep=25))
    run()  # warm up
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


#: the timer, for other benchmarks of this target (the matmul template's choice)
time_ms = _time


def _cache_path(kernel: TritonKernel, candidates: list[LaunchConfig], device: torch.device) -> Path:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    key = content_key(
        ["ember-triton-autotune", kernel.code, kernel.kind, str(kernel.xnumel), name,
         repr(candidates)]
    )  # fmt: skip
    return ensure_private_dir(triton_root() / "autotune") / f"{key}.json"


def autotune_kernel(
    fn: Any, kernel: TritonKernel, args: list, rnumel: int, device: torch.device
) -> LaunchConfig:
    """The fastest candidate configuration of ``kernel`` (cached on disk)."""
    if kernel.kind == "finish":
        return kernel.config  # tiny: reduces NSPLIT partials per row
    xnumel = kernel.xnumel
    window = kernel.kind == "looped" and kernel.config.RBLOCK == 1  # a column window
    candidates = candidate_configs(kernel.kind, xnumel, rnumel, column=window)
    if kernel.kind == "partial":  # the workspace and the finish kernel fix its tiling
        candidates = split_candidates(kernel.config)
    path = _cache_path(kernel, candidates, device)
    cached = _load_winner(path)
    if cached is not None:
        return cached
    timings = []
    for config in candidates:
        try:
            timings.append((_time(launcher(fn, kernel, args, config), device), config))
        except Exception as exc:  # a config that does not compile (too many registers...)
            log.info("autotune %s: %s failed: %s", kernel.name, config.describe(), exc)
    if not timings:
        return kernel.config
    best_ms, best = min(timings, key=lambda t: t[0])
    log.info("autotune %s: %s (%.4f ms of %d)", kernel.name, best.describe(), best_ms, len(timings))
    atomic_write(path, json.dumps({"key": path.stem, "config": asdict(best)}).encode())
    return best


def _load_winner(path: Path) -> LaunchConfig | None:
    """The winner recorded at `path`, or None: missing, corrupt, or an entry of another key
    (copied or moved under this name: it was tuned for another kernel) is re-tuned."""
    try:
        entry = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        entry = None
    try:
        if isinstance(entry, dict) and entry.get("key") == path.stem:
            return LaunchConfig(**entry["config"])
    except (KeyError, TypeError):
        pass
    log.warning("ignoring an autotune cache entry %s that is corrupt or another key's", path)
    return None
