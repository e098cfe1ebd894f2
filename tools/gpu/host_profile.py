"""Where a compiled step spends its host (CPU) time on the GPU: torch.compile against Ember.

    python tools/gpu/host_profile.py llama train [--size real] [--out DIR]
    python tools/gpu/host_profile.py hrnet_w18 --suite timm --suite-mode infer-bf16

A zoo model (`ember_zoo`), or with ``--suite`` a public-suite model at its GPU size, run as
the suite runner runs it (`benchmarks/suites/run.py`'s `make_step`: autocast, the optimizer
step inside a training step).

Per compiler: the step's wall time with and without a sync after each step (equal when the
host is the bottleneck), the host time to issue one step, the CUDA runtime calls and kernels
per step by kind (torch.profiler), and the Python functions that take the host's time
(cProfile, by own time). With ``--out``, the generated code of both goes there (Ember's
``ember.output_code`` log, torch.compile's cache of output code), for reading offline.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import io
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "suites"))
from kernel_profile import kernel_kind  # one table of kernel kinds for every GPU tool
from profile_model import step, sync

import ember
from ember_zoo import build


def timed(run_step, steps: int, sync_each: bool) -> float:
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        run_step()
        if sync_each:
            sync()
        times.append(time.perf_counter() - start)
    sync()
    return statistics.median(times) * 1e3


def phases(case, fn, mode, steps: int = 20) -> None:
    """Host time of the forward call, of the backward call, and the wait for the GPU after
    them (medians), and the garbage collections that ran in those steps."""
    collections_run = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    started = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            entry = collections_run[info["generation"]]
            entry[0] += 1
            entry[1] += time.perf_counter() - started[0]

    forward, backward, drain = [], [], []
    gc.callbacks.append(on_gc)
    try:
        for _ in range(steps):
            sync()
            t0 = time.perf_counter()
            if mode == "infer":
                with torch.no_grad():
                    fn(*case.example_inputs, **case.example_kwargs)
                t1 = t2 = time.perf_counter()
            else:
                out = fn(*case.example_inputs, **case.example_kwargs)
                t1 = time.perf_counter()
                case.loss(out).backward()
                t2 = time.perf_counter()
            sync()
            t3 = time.perf_counter()
            forward.append(t1 - t0)
            backward.append(t2 - t1)
            drain.append(t3 - t2)
    finally:
        gc.callbacks.remove(on_gc)
    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    print(f"   host: forward {med(forward):.2f} ms, backward {med(backward):.2f} ms, then GPU "
          f"{med(drain):.2f} ms; gc per step: " + ", ".join(
              f"gen{g} {n / steps:.2f}x {t / steps * 1e3:.2f} ms"
              for g, (n, t) in collections_run.items()) + f"; {len(gc.get_objects())} objects")  # fmt: skip


def profile_steps(name, run_step, steps: int, out: Path | None, split=None) -> None:
    """``run_step``: one step, no arguments; ``split``: (case, fn, mode) of a zoo model, whose
    forward and backward host times are then shown apart."""
    for _ in range(5):
        run_step()
    async_ms = timed(run_step, 20, sync_each=False)
    sync_ms = timed(run_step, 20, sync_each=True)
    print(f"== {name}: issue {async_ms:.2f} ms/step without sync, {sync_ms:.2f} ms/step with "
          "a sync after each")  # fmt: skip
    if split is not None:
        phases(*split)

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            run_step()
        sync()
    if out is not None:
        prof.export_chrome_trace(str(out / f"trace_{name}.json"))

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run_step()
        sync()
    kernels: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    gpu_us: collections.Counter = collections.Counter()
    runtime: collections.Counter = collections.Counter()
    for e in prof.key_averages():
        if e.device_type.name == "CUDA":
            kernels[e.key] += e.count
            kinds[kernel_kind(e.key)] += e.count
            gpu_us[kernel_kind(e.key)] += e.self_device_time_total
        elif e.key.startswith(("cuda", "cu")) and not e.key.startswith("cudnn"):
            runtime[e.key] += e.count
    per = float(steps)
    print("   kernels/step by kind: " + ", ".join(
        f"{k} {n / per:.0f} ({gpu_us[k] / per / 1e3:.2f} ms)" for k, n in kinds.most_common()))  # fmt: skip
    print("   runtime calls/step: " + ", ".join(
        f"{k} {n / per:.0f}" for k, n in runtime.most_common(8)))  # fmt: skip
    if out is not None:
        with open(out / f"kernels_{name}.txt", "w") as f:
            for key, n in kernels.most_common():
                f.write(f"{n / per:8.1f}  {kernel_kind(key):12s} {key}\n")

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        run_step()
    sync()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(28)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
    print(f"   cProfile over {steps} steps, by own time:")
    for ln in lines[start : start + 29]:
        print("   " + re.sub(r"/\S*/(site-packages|src|lib/python3\.\d+)/", "", ln))


def zoo_profiles(args: argparse.Namespace, compilers: list[str]) -> None:
    case = build(args.model, args.size, device=args.device)
    if args.mode == "infer":
        case.model.eval()
    if "torch.compile" in compilers:
        fn = torch.compile(case.model)
        profile_steps("torch.compile", lambda: step(case, fn, args.mode), args.steps, args.out,
                      split=(case, fn, args.mode))  # fmt: skip
    if "ember" in compilers:
        ember.reset()
        compiled = ember.compile(case.model)
        profile_steps("ember", lambda: step(case, compiled, args.mode), args.steps, args.out,
                      split=(case, compiled, args.mode))  # fmt: skip
        print("   ember counters:", {k: dict(v) for k, v in ember.counters.items()})


def suite_profiles(args: argparse.Namespace, compilers: list[str]) -> None:
    from cases import BUILDERS, to_device
    from models import entries
    from run import make_step

    size = "gpu" if args.device == "cuda" else "cpu-small"
    case = BUILDERS[args.suite](entries(args.suite, [args.model])[0], size)
    case = to_device(case, args.device)
    case.model.train(args.suite_mode.startswith("train"))
    for name in compilers:
        ember.reset()
        run_step = make_step(case, name, args.suite_mode, args.device)
        profile_steps(name, run_step, args.steps, args.out)
        if name == "ember":
            print("   ember counters:", {k: dict(v) for k, v in ember.counters.items()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("mode", nargs="?", default="train", choices=["infer", "train"])
    parser.add_argument("--size", default="real")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--compilers", default="torch.compile,ember")
    parser.add_argument("--suite", default=None, help="timm, huggingface or torchvision")
    parser.add_argument("--suite-mode", default="infer-bf16",
                        choices=["infer-bf16", "infer-fp32", "train-bf16"])  # fmt: skip
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tc_cache_"))
        os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember_cache_"))
    compilers = args.compilers.split(",")
    if args.suite:
        suite_profiles(args, compilers)
    else:
        zoo_profiles(args, compilers)
    if args.out is not None:
        for name, root in (("tc", "TORCHINDUCTOR_CACHE_DIR"), ("ember", "EMBER_CACHE_DIR")):
            root = Path(os.environ[root])
            with open(args.out / f"{name}_code_{args.model}_{args.mode}.txt", "w") as f:
                for path in sorted(root.rglob("*.py")):
                    f.write(f"#### {path.relative_to(root)}\n{path.read_text()}\n")


if __name__ == "__main__":
    main()
