"""Compile a real model with Ember's full pipeline on this CPU and show the speedup.

The model is compiled with `ember.compile(model)` (the `inductor` backend: tracer -> aot
autograd -> prims -> loop IR -> fused C++/OpenMP kernels), checked against eager PyTorch, then
both are timed interleaved (eager, Ember, eager, Ember, ...) and the median ratio is printed,
for inference and for a training step. Everything the compiles did is traced (ember.trace) and
the run ends by writing the HTML compile report (ember.report) and printing its path.

    python examples/inductor_demo.py [model] [--size tiny|real]   # default: transformer_block real
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

import torch

import ember
import ember.trace
from ember.report import write_report
from ember_zoo import build, output_tensors


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(label: str, eager_step, ember_step, rounds: int = 15) -> None:
    for _ in range(3):  # warm-up (the first Ember call compiles)
        eager_step()
        ember_step()
    ratios, eager_ms, ember_ms = [], [], []
    for _ in range(rounds):
        e, c = timed(eager_step), timed(ember_step)
        ratios.append(e / c)
        eager_ms.append(e * 1e3)
        ember_ms.append(c * 1e3)
    # one statistic throughout: the speedup is the ratio of the two medians shown; the spread
    # of the per-round ratios (interleaved pairs) says how much to trust it
    eager_median, ember_median = statistics.median(eager_ms), statistics.median(ember_ms)
    low, _, high = statistics.quantiles(ratios, n=4)
    print(f"  {label}: median of {rounds} interleaved rounds: eager {eager_median:.2f} ms, "
          f"Ember {ember_median:.2f} ms -> speedup {eager_median / ember_median:.2f}x "
          f"(per-round ratios, middle half: {low:.2f}-{high:.2f}x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="transformer_block")
    parser.add_argument("--size", default="real", choices=("tiny", "real"))
    parser.add_argument("--report", default="build/ember_demo/report.html", help="HTML report")
    args = parser.parse_args()
    trace_dir = Path(args.report).parent / "trace"
    shutil.rmtree(trace_dir, ignore_errors=True)  # this run's trace only
    ember.config.trace_dir = str(trace_dir)
    case = build(args.model, args.size)
    compiled = ember.compile(case.model)  # backend="inductor", the default

    start = time.perf_counter()
    with torch.no_grad():
        got = compiled(*case.example_inputs, **case.example_kwargs)
    compile_s = time.perf_counter() - start
    with torch.no_grad():
        expected = case.model(*case.example_inputs, **case.example_kwargs)
    worst = max(
        float((g - e).abs().max())
        for g, e in zip(output_tensors(got), output_tensors(expected), strict=True)
    )
    stats = ember.counters["inductor"]
    print(f"=== {args.model} ({args.size}) through ember.compile, backend inductor")
    print(f"  first call (trace + compile + run): {compile_s:.2f} s; {stats['forward_graphs']} "
          f"graph(s), {stats['kernels']} fused C++ kernels; max |Ember - eager| = {worst:.1e}")  # fmt: skip
    assert worst < 1e-3, "compiled result differs from eager"

    def infer(model):
        def step():
            with torch.no_grad():
                model(*case.example_inputs, **case.example_kwargs)

        return step

    def train(model):
        def step():
            case.loss(model(*case.example_inputs, **case.example_kwargs)).backward()

        return step

    compare("inference", infer(case.model), infer(compiled))
    compare("training step", train(case.model), train(compiled))
    ember.trace.close()
    print(f"  compile report: {write_report(trace_dir, args.report).resolve()}")


if __name__ == "__main__":
    main()
