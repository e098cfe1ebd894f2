"""Where ConvNeXt's time and memory go under Ember (issue 28), in one device call.

timm convnext_tiny, bf16 autocast inference (fp32 with --fp32): eager, torch.compile and
Ember timed interleaved (median of rounds), peak memory of each (its own first call and
steady calls, from a reset of the peak counter), the count of graphs Ember made, the
externs of Ember's wrapper (convolution / mm / bmm calls: a bmm there is the weight-copy
cliff), and a torch.profiler table of Ember's top CUDA kernels by self time.

    python tools/gpu/convnext_probe.py                       # H200: batch 32, 224x224
    python tools/gpu/convnext_probe.py --model convnext_atto --batch 8
    python tools/gpu/convnext_probe.py --cpu                 # quick CPU run, small sizes
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

# a fresh kernel cache, so that the wrappers read below are this run's (a cold compile)
os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="convnext-probe-"))

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "suites"))

from vision_import import import_timm

import ember


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _peak_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_mb(device: str, base: int) -> float:
    if device != "cuda":
        return float("nan")  # no allocator statistics on the CPU
    return (torch.cuda.max_memory_allocated() - base) / 2**20


class Runner:
    """One compiler's callable under the probe's autocast/no_grad context."""

    def __init__(self, name, fn, device, dtype):
        self.name, self.fn, self.device, self.dtype = name, fn, device, dtype
        self.times: list[float] = []
        self.first_s = float("nan")
        self.peak_mb = float("nan")

    def call(self, x):
        with (
            torch.no_grad(),
            torch.autocast(self.device, self.dtype, enabled=self.dtype != torch.float32),
        ):
            return self.fn(x)

    def first(self, x, base: int):
        _peak_reset(self.device)
        start = time.perf_counter()
        out = self.call(x)
        _sync(self.device)
        self.first_s = time.perf_counter() - start
        return out

    def timed(self, x, base: int, reps: int) -> None:
        _peak_reset(self.device)
        _sync(self.device)
        start = time.perf_counter()
        for _ in range(reps):
            self.call(x)
        _sync(self.device)
        self.times.append((time.perf_counter() - start) / reps)
        self.peak_mb = _peak_mb(self.device, base)


def _build(args):
    timm = import_timm()
    # convnext_atto's default is conv_mlp=True; the CPU run takes tiny's Linear-on-NHWC block
    extra = {"conv_mlp": False} if args.device == "cpu" and "convnext" in args.model else {}
    model = timm.create_model(args.model, pretrained=False, **extra).eval().to(args.device)
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device)
    return model, x


def _check(name, out, ref) -> None:
    err = (out.float() - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    print(f"  {name:14s} max |diff| vs eager {err:.3g} (max |eager| {scale:.3g})")


def _profile_ember(runner: Runner, x, device: str, top: int) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    sort = "self_cpu_time_total"
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        sort = "self_cuda_time_total"
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(3):
            runner.call(x)
        _sync(device)
    print(f"\n== Ember: top {top} kernels by self time (3 calls)")
    print(prof.key_averages().table(sort_by=sort, row_limit=top, max_name_column_width=90))


def _wrapper_externs() -> None:
    """Extern calls in the generated wrappers of this run's cache (a bmm is the cliff)."""
    root = Path(os.environ["EMBER_CACHE_DIR"])
    counts: dict[str, int] = {}
    for path in root.rglob("*.py"):
        text = path.read_text(errors="replace")
        if "def call(args" not in text:
            continue
        counts["wrappers"] = counts.get("wrappers", 0) + 1
        for op in ("_convolution(", "_mm_out(", "_bmm_out(", "_empty_strided("):
            counts[op] = counts.get(op, 0) + text.count(op)
    print(f"  wrapper calls in {root}: {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="convnext_tiny")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cpu", action="store_true", help="CPU run at small sizes (a smoke test)")
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    args.device = "cpu" if args.cpu or not torch.cuda.is_available() else "cuda"
    if args.device == "cpu":
        args.model = "convnext_atto" if args.model == "convnext_tiny" else args.model
        args.batch, args.size, args.rounds, args.reps = min(args.batch, 2), min(args.size, 64), 2, 2
    dtype = torch.float32 if args.fp32 else torch.bfloat16
    model, x = _build(args)
    base = torch.cuda.memory_allocated() if args.device == "cuda" else 0
    print(f"== {args.model} batch {args.batch} {args.size}x{args.size} {args.device} "
          f"{'fp32' if args.fp32 else 'bf16 autocast'} inference, torch {torch.__version__}")  # fmt: skip
    ember.reset()
    runners = [Runner("eager", model, args.device, dtype)]
    if not args.no_torch_compile and args.device == "cuda":
        runners.append(Runner("torch.compile", torch.compile(model), args.device, dtype))
    runners.append(Runner("ember", ember.compile(model), args.device, dtype))
    ref = None
    for r in runners:
        out = r.first(x, base)
        ref = out if ref is None else ref
        _check(r.name, out, ref)
        r.first_peak_mb = _peak_mb(args.device, base)
    for _ in range(args.rounds):  # interleaved rounds
        for r in runners:
            r.timed(x, base, args.reps)
    eager = statistics.median(runners[0].times)
    print(f"\n{'compiler':14s} {'median ms':>10s} {'speedup':>8s} {'peak MB':>9s} "
          f"{'first-call peak MB':>19s} {'first call s':>13s}")  # fmt: skip
    for r in runners:
        med = statistics.median(r.times)
        print(f"{r.name:14s} {med * 1e3:10.2f} {eager / med:7.2f}x {r.peak_mb:9.1f} "
              f"{r.first_peak_mb:19.1f} {r.first_s:13.2f}")  # fmt: skip
    print("  ember counters:", {k: dict(v) for k, v in ember.counters.items()})
    _wrapper_externs()
    _profile_ember(runners[-1], x, args.device, args.top)


if __name__ == "__main__":
    main()
