"""Where Ember's launch heuristics leave GPU time on a suite model: its step is compiled as
the suite runs it (default mode), then each of its largest distinct Triton kernels is timed
on scratch buffers with its own launch configuration and with every candidate max-autotune
would try (heuristics.candidate_configs). Prints, per kernel, the default's time, the best
candidate's and the time saved over all its launches in the step, largest first: what a
better heuristic would win, kernel by kernel, without paying max-autotune's compile time.

    python tools/gpu/launch_configs.py --suite timm --models swin_base_patch4_window7_224,tnt_s_patch16_224
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))


def _rnumel(sched, group_name: str) -> int:
    group = next(g for g in sched if g.name == group_name)
    n = 1
    for s in group.reduction_sizes:
        n *= int(s)
    return n


def largest_kernels(model: str, args: argparse.Namespace) -> tuple[list, dict, Counter]:
    """Compiles ``model``'s step as the suite runs it and returns its distinct Triton
    kernels, largest first (points x row x launches), with each one's (graph, group,
    kernel, rnumel, module) and launch count."""
    import torch
    from cases import BUILDERS, to_device
    from models import entries
    from run import make_step

    import ember_codegen.api as codegen_api
    from ember_codegen.wrapper.size_bindings import concrete

    graphs = []

    def keep(sched, *a, **k):
        graph = compile_triton(sched, *a, **k)
        graphs.append((sched, graph))
        return graph

    compile_triton, codegen_api.compile_triton = codegen_api.compile_triton, keep
    try:
        torch.manual_seed(0)
        entry = entries(args.suite, [model])[0]
        case = to_device(BUILDERS[args.suite](entry, args.size), args.device)
        case.model.train(args.mode.startswith("train"))
        make_step(case, "eager", args.mode, args.device)()
        make_step(case, "ember", args.mode, args.device)()
    finally:
        codegen_api.compile_triton = compile_triton
    seen: Counter = Counter()
    jobs = {}
    for sched, graph in graphs:
        module = sys.modules.get(Path(graph.module_path).stem)
        for group in graph.groups:
            for kernel in group.kernels:
                if kernel.kind in ("combo", "finish") or kernel.size_params:
                    continue
                rnumel = kernel.rnumel if kernel.rnumel is not None else _rnumel(sched, group.name)
                key = (kernel.code.split("\n", 2)[-1], kernel.kind, concrete(kernel.xnumel), rnumel)
                seen[key] += 1
                jobs.setdefault(key, (graph, group, kernel, rnumel, module))
    largest = sorted(jobs, key=lambda k: -(k[2] * k[3] * seen[k]))
    return largest, jobs, seen


def _report(model: str, args: argparse.Namespace) -> None:
    import torch

    import ember
    from ember_codegen.triton.autotune import launcher, scratch_args_from, time_ms
    from ember_codegen.triton.heuristics import candidate_configs, split_candidates
    from ember_codegen.wrapper.size_bindings import concrete

    largest, jobs, seen = largest_kernels(model, args)
    largest = largest[: args.max_kernels]
    device = torch.device(args.device)
    rows = []
    start = time.perf_counter()
    for key in largest:
        graph, group, kernel, rnumel, module = jobs[key]
        fn = getattr(module, kernel.name, None) if module is not None else None
        if fn is None:
            fn = graph_fn(graph, kernel.name)
        if fn is None:
            continue
        kernel_args = scratch_args_from(kernel, group, graph.launch_layouts, device)
        window = kernel.kind == "looped" and kernel.config.RBLOCK == 1
        timed = []
        candidates = (
            split_candidates(kernel.config)
            if kernel.kind == "partial"
            else candidate_configs(kernel.kind, key[2], rnumel, window)
        )
        for config in [kernel.config, *candidates]:
            try:
                timed.append((time_ms(launcher(fn, kernel, kernel_args, config), device), config))
            except Exception as exc:  # a config that does not build
                print(f"   {kernel.name} {config.describe()}: {type(exc).__name__}")
        if not timed:
            continue
        default_ms = timed[0][0]
        best_ms, best = min(timed, key=lambda t: t[0])
        saved = (default_ms - best_ms) * seen[key]
        rows.append((saved, kernel, default_ms, best_ms, best, seen[key], timed))
        if time.perf_counter() - start > args.budget_s:
            print(f"   (stopped after {len(rows)} kernels: --budget-s {args.budget_s})")
            break
    print(f"== {model} ({args.mode}): {len(jobs)} distinct kernels, {len(rows)} timed")
    print("   saved_ms  x  default_ms  best_ms  kernel: default -> best")
    for saved, kernel, default_ms, best_ms, best, count, timed in sorted(rows, key=lambda r: -r[0]):
        print(
            f"   {saved:8.3f} {count:2d}  {default_ms:9.4f}  {best_ms:8.4f}  {kernel.name} "
            f"[{kernel.kind} x={concrete(kernel.xnumel)}]: {kernel.config.describe()} -> "
            f"{best.describe()}"
        )
        runners_up = sorted(timed, key=lambda t: t[0])[:4]
        print("            next: " + "; ".join(f"{ms:.4f} {c.describe()}" for ms, c in runners_up))
    total = sum(r[0] for r in rows)
    print(f"   all timed kernels: {total:.3f} ms a step to win")
    ember.reset()


def graph_fn(graph, name: str):
    """The jit function of ``name`` from the graph's kernel module (loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(graph.module_path).stem, graph.module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name, None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="timm")
    p.add_argument("--models", required=True)
    p.add_argument("--mode", default="infer-bf16")
    # a dry run on a machine without a GPU: --device cpu --size cpu-small with
    # TRITON_INTERPRET=1 EMBER_INDUCTOR_TARGET=triton (the mechanism, not the timings)
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="gpu")
    p.add_argument("--max-kernels", type=int, default=30)
    p.add_argument("--budget-s", type=float, default=150.0, help="timing time per model")
    args = p.parse_args()
    os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember-launch-configs-"))
    for model in args.models.split(","):
        _report(model, args)


if __name__ == "__main__":
    main()
