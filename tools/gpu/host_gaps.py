"""Why a suite model's compiled step takes longer than its GPU time: the host's side.

    python tools/gpu/host_gaps.py --suite timm --models fbnetc_100,hrnet_w18 --mode infer-bf16

Per model and compiler (torch.compile, Ember): the step's wall time over back-to-back steps,
the host's time to issue one step (no sync), the CUDA runtime calls per step that can stall
the host (memcpy, synchronize, malloc/free, event syncs), and each place that synchronized
with the GPU during a step (`torch.cuda.set_sync_debug_mode("warn")`, with the Python line
that asked), and the Python functions that take the host's time (cProfile, by own time).
A compiled step whose host waits for the GPU each step pays its host time on
top of the GPU's: the wall minus GPU gap the suite records show.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

SUITES = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"
sys.path.insert(0, str(SUITES))

#: runtime calls that block the host or may (pageable copies, allocations, syncs)
STALLS = ("Memcpy", "Synchronize", "Malloc", "Free", "EventSynchronize", "StreamWait")


def _median_ms(step, n: int, sync_each: bool) -> float:
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        if sync_each:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e3


def _back_to_back_ms(step, n: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e3


def _sync_sites(step) -> collections.Counter:
    """Where a step synchronized with the GPU: the line each warning names."""
    sites: collections.Counter = collections.Counter()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
    for w in caught:
        if "synchroniz" not in str(w.message):
            continue
        sites[f"{w.filename}:{w.lineno} {str(w.message)[:80]}"] += 1
    return sites


def _runtime_calls(step, steps: int = 3) -> collections.Counter:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    calls: collections.Counter = collections.Counter()
    for e in prof.key_averages():
        if e.key.startswith("cuda") and any(s in e.key for s in STALLS):
            calls[e.key] += e.count / steps
    return calls


def _python_hotspots(step, steps: int = 3, top: int = 12) -> str:
    """The Python functions that take the host's time in a step, by own time (cProfile)."""
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        step()
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
    return "\n".join("   " + ln for ln in lines[-top - 1 :])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="timm")
    p.add_argument("--models", required=True)
    p.add_argument("--mode", default="infer-bf16")
    p.add_argument("--compilers", default="torch.compile,ember")
    args = p.parse_args()

    from cases import BUILDERS, to_device
    from models import entries
    from run import make_step, reset_all

    for name in args.models.split(","):
        case = to_device(BUILDERS[args.suite](entries(args.suite, [name])[0], "gpu"), "cuda")
        case.model.train(args.mode.startswith("train"))
        for compiler in args.compilers.split(","):
            reset_all()
            step = make_step(case, compiler, args.mode, "cuda")
            for _ in range(3):
                step()
            wall = _back_to_back_ms(step, 20)
            issue = _median_ms(step, 10, sync_each=False)
            synced = _median_ms(step, 10, sync_each=True)
            calls = _runtime_calls(step)
            sites = _sync_sites(step)
            print(f"== {name} {compiler}: back-to-back {wall:.2f} ms/step, host issue "
                  f"{issue:.2f} ms, synced step {synced:.2f} ms")  # fmt: skip
            print("   stalling runtime calls/step: "
                  + (", ".join(f"{k} {n:.1f}" for k, n in calls.most_common()) or "none"))  # fmt: skip
            for site, n in sites.most_common(8):
                print(f"   sync x{n}: {site}")
            if not sites:
                print("   no synchronizing call in a step")
            print(f"   Python by own time over 3 steps:\n{_python_hotspots(step)}")


if __name__ == "__main__":
    main()
