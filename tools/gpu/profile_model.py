"""Where a compiled zoo model spends its GPU time: the top kernels of eager, torch.compile
and Ember (default mode) under torch.profiler, plus Ember's graph / extern / fallback counts.

    python tools/gpu/profile_model.py gpt2 [infer|train] [--size real]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import ember
from ember_zoo import build, output_tensors


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step(case, fn, mode):
    if mode == "infer":
        with torch.no_grad():
            return fn(*case.example_inputs, **case.example_kwargs)
    out = fn(*case.example_inputs, **case.example_kwargs)
    case.loss(out).backward()
    return out


def report(name, case, fn, mode, rows):
    for _ in range(3):
        step(case, fn, mode)
    sync()
    start = time.perf_counter()
    for _ in range(5):
        step(case, fn, mode)
    sync()
    wall = (time.perf_counter() - start) / 5 * 1e3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(case, fn, mode)
        sync()
    device = "CUDA" if torch.cuda.is_available() else "CPU"
    events = [e for e in prof.key_averages() if e.device_type.name == device]
    gpu = sum(e.self_device_time_total for e in events) / 3 / 1e3
    print(f"== {name}: wall {wall:.2f} ms/step, GPU busy {gpu:.2f} ms/step, "
          f"{sum(e.count for e in events) // 3} kernels/step")  # fmt: skip
    events.sort(key=lambda e: -e.self_device_time_total)
    for e in events[:rows]:
        print(f"   {e.self_device_time_total / 3 / 1e3:8.3f} ms  x{e.count // 3:<4} {e.key[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("mode", nargs="?", default="infer", choices=["infer", "train"])
    parser.add_argument("--size", default="real")
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    case = build(args.model, args.size, device=args.device)
    if args.mode == "infer":
        case.model.eval()
    report("eager", case, case.model, args.mode, args.rows)
    report("torch.compile", case, torch.compile(case.model), args.mode, args.rows)
    ember.reset()
    compiled = ember.compile(case.model)
    report("ember", case, compiled, args.mode, args.rows)
    print("ember counters:", {k: dict(v) for k, v in ember.counters.items()})
    got = step(case, compiled, "infer")
    want = step(case, case.model, "infer")
    diff = max((g - w).abs().max().item() for g, w in
               zip(output_tensors(got), output_tensors(want), strict=True))  # fmt: skip
    print(f"max abs diff vs eager: {diff:.2e}")


if __name__ == "__main__":
    main()
