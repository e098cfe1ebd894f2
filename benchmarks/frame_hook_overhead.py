"""Nanoseconds per call of a trivial function with the frame hook off vs on.

Configurations, measured interleaved (one batch of each per round) and reported as
medians over the rounds:

  off              hook off: CPython's own call path
  passthrough      hook on, function skip-listed: the cost the hook adds to frames it
                   leaves alone
  hit, C guard     hook on, a cached entry whose guard is operator.truth (C)
  hit, Py guard    hook on, a cached entry whose guard is a Python `return True`

The guard's own cost (calling it on a one-item dict, measured the same way) is
subtracted to give the hook's overhead, which is what the < 100 ns target is about.

    python benchmarks/frame_hook_overhead.py [--calls N] [--rounds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import statistics
import sys
import time

import ember_frame_hook as fh


def trivial(x):
    return x


def py_guard(f_locals):
    return True


def call_loop(fn, n):
    start = time.perf_counter_ns()
    for _ in range(n):
        fn(1)
    return time.perf_counter_ns() - start


def guard_loop(guard, n):
    f_locals = {"x": 1}
    start = time.perf_counter_ns()
    for _ in range(n):
        guard(f_locals)
    return time.perf_counter_ns() - start


def empty_loop(n):
    start = time.perf_counter_ns()
    for _ in range(n):
        pass
    return time.perf_counter_ns() - start


def prime(guard):
    """Cache exactly one entry for `trivial` with `guard`."""
    fh.reset()
    substitute = trivial.__code__.replace(co_name="trivial")
    entry = fh.GuardedCode(substitute, guard)

    def callback(frame, cache):
        return entry if frame.f_code is trivial.__code__ else None

    with fh.eval_frame(callback):
        trivial(1)
    assert fh.cache_entries(trivial.__code__) == [entry]
    return entry


def measure(calls: int, rounds: int) -> dict[str, float]:
    c_entry = prime(operator.truth)
    py_entry = prime(py_guard)
    fh.reset()

    def with_entry(entry):
        def callback(frame, cache):
            return entry if frame.f_code is trivial.__code__ else None

        def run():
            fh.reset()
            with fh.eval_frame(callback):
                trivial(1)  # miss: caches the entry
                return call_loop(trivial, calls)

        return run

    def passthrough():
        fh.reset()
        fh.skip_code(trivial.__code__)
        with fh.eval_frame(lambda frame, cache: None):
            return call_loop(trivial, calls)

    configs = {
        "off": lambda: call_loop(trivial, calls),
        "passthrough": passthrough,
        "hit, C guard": with_entry(c_entry),
        "hit, Py guard": with_entry(py_entry),
        "C guard alone": lambda: guard_loop(operator.truth, calls),
        "Py guard alone": lambda: guard_loop(py_guard, calls),
        "empty loop": lambda: empty_loop(calls),
    }
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for run in configs.values():  # warm-up
        run()
    for _ in range(rounds):
        for name, run in configs.items():
            samples[name].append(run() / calls)
    fh.reset()
    return {name: statistics.median(values) for name, values in samples.items()}


def report(m: dict[str, float]) -> dict[str, float]:
    c_guard = m["C guard alone"] - m["empty loop"]
    py_guard_cost = m["Py guard alone"] - m["empty loop"]
    results = {
        "off_ns": m["off"],
        "passthrough_ns": m["passthrough"],
        "hit_c_guard_ns": m["hit, C guard"],
        "hit_py_guard_ns": m["hit, Py guard"],
        "c_guard_cost_ns": c_guard,
        "py_guard_cost_ns": py_guard_cost,
        "passthrough_overhead_ns": m["passthrough"] - m["off"],
        "hook_overhead_c_guard_ns": m["hit, C guard"] - m["off"] - c_guard,
        "hook_overhead_py_guard_ns": m["hit, Py guard"] - m["off"] - py_guard_cost,
    }
    print(f"Frame hook overhead: Python {platform.python_version()}, {platform.machine()}")
    print()
    print("| configuration | ns per call (median) |")
    print("|---|---:|")
    for name in ("off", "passthrough", "hit, C guard", "hit, Py guard"):
        print(f"| {name} | {m[name]:.1f} |")
    print()
    print("| derived | ns |")
    print("|---|---:|")
    print(f"| C guard's own cost | {c_guard:.1f} |")
    print(f"| Py guard's own cost | {py_guard_cost:.1f} |")
    print(f"| hook overhead on a skipped frame | {results['passthrough_overhead_ns']:.1f} |")
    print(
        f"| hook overhead on a hit, beyond the C guard | {results['hook_overhead_c_guard_ns']:.1f} |"
    )
    print(
        f"| hook overhead on a hit, beyond the Py guard | {results['hook_overhead_py_guard_ns']:.1f} |"
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per batch")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be positive")
    results = report(measure(args.calls, args.rounds))
    results["python"] = sys.version
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
