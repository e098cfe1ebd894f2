"""Tracer costs, Ember vs torch.compile, both with the eager backend (graphs run as traced).

(a) Per-call overhead on a guard hit: a 3-tensor function, eager PyTorch vs
    torch.compile(backend="eager") vs ember.compile(backend="eager"), interleaved batches,
    median ns per call, and the overhead of each over eager.
(b) First-call time of a BERT-base-sized model from the zoo, cold (caches reset),
    alternating the two compilers, median of --trace-repeats; and the trace time, which is
    the first call minus a warm eager call (the first call also runs the model once).

    python benchmarks/tracer_overhead.py [--calls N] [--rounds R] [--trace-repeats K]
                                         [--model bert] [--size real] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
import torch._dynamo

import ember
from ember_zoo import build


def three_tensor_fn(a, b, c):
    return a + b * c


def per_call_ns(fn, args, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter_ns() - start) / calls


def guard_hit_overhead(calls: int, rounds: int) -> dict[str, float]:
    args = tuple(torch.randn(8) for _ in range(3))
    ember.reset()
    torch._dynamo.reset()
    candidates = {
        "eager": three_tensor_fn,
        "torch.compile": torch.compile(three_tensor_fn, backend="eager"),
        "ember": ember.compile(three_tensor_fn, backend="eager"),
    }
    for name, fn in candidates.items():
        torch.testing.assert_close(fn(*args), three_tensor_fn(*args), msg=name)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            samples[name].append(per_call_ns(fn, args, calls))
    medians = {name: statistics.median(v) for name, v in samples.items()}
    return {
        **{f"{k}_ns": v for k, v in medians.items()},
        "torch.compile_overhead_ns": medians["torch.compile"] - medians["eager"],
        "ember_overhead_ns": medians["ember"] - medians["eager"],
    }


def first_call_seconds(model_name: str, size: str, repeats: int) -> dict[str, float]:
    case = build(model_name, size)
    model, args, kwargs = case.model, case.example_inputs, case.example_kwargs

    def eager_call() -> float:
        with torch.no_grad():
            start = time.perf_counter()
            model(*args, **kwargs)
            return time.perf_counter() - start

    def cold(compiler) -> float:
        ember.reset()
        torch._dynamo.reset()
        compiled = compiler(model)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*args, **kwargs)
        return time.perf_counter() - start

    compilers = {
        "torch.compile": lambda m: torch.compile(m, backend="eager"),
        "ember": lambda m: ember.compile(m, backend="eager"),
    }
    samples: dict[str, list[float]] = {name: [] for name in compilers}
    eager_samples = [eager_call(), eager_call()]  # warm-up
    for _ in range(repeats):
        for name, compiler in compilers.items():
            eager_samples.append(eager_call())
            samples[name].append(cold(compiler))
    eager_s = statistics.median(eager_samples[2:])
    result = {f"{name}_first_call_s": statistics.median(v) for name, v in samples.items()}
    for name in compilers:
        # The first call also runs the model once: what is left is tracing and compiling.
        result[f"{name}_trace_s"] = result[f"{name}_first_call_s"] - eager_s
    result["eager_call_s"] = eager_s
    result["ember_over_torch.compile"] = result["ember_trace_s"] / result["torch.compile_trace_s"]
    report = ember.explain(model)(*args, **kwargs)
    result["ember_graphs"] = report.graph_count
    result["ember_graph_breaks"] = report.graph_break_count
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--trace-repeats", type=int, default=3)
    parser.add_argument("--model", default="bert")
    parser.add_argument("--size", default="real", choices=["tiny", "real"])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    print(
        f"Python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    hit = guard_hit_overhead(args.calls, args.rounds)
    print("\n(a) guard hit, 3-tensor function, ns per call (median of interleaved batches)\n")
    print("| | eager | torch.compile (eager backend) | ember (eager backend) |")
    print("|---|---:|---:|---:|")
    print(
        f"| per call | {hit['eager_ns']:.0f} | {hit['torch.compile_ns']:.0f} | {hit['ember_ns']:.0f} |"
    )
    print(
        f"| overhead over eager | — | {hit['torch.compile_overhead_ns']:.0f} | {hit['ember_overhead_ns']:.0f} |"
    )
    first = first_call_seconds(args.model, args.size, args.trace_repeats)
    print(
        f"\n(b) first call of {args.model} ({args.size}), cold, seconds "
        f"(median of {args.trace_repeats})\n"
    )
    print("| | warm eager call | torch.compile | ember |")
    print("|---|---:|---:|---:|")
    print(
        f"| first call | {first['eager_call_s']:.3f} | {first['torch.compile_first_call_s']:.2f} | "
        f"{first['ember_first_call_s']:.2f} |"
    )
    print(
        f"| trace time (first call - eager call) | - | {first['torch.compile_trace_s']:.2f} | "
        f"{first['ember_trace_s']:.2f} |"
    )
    print(
        f"\nember trace time / torch.compile trace time = {first['ember_over_torch.compile']:.2f} "
        f"(ember: {first['ember_graphs']} graphs, {first['ember_graph_breaks']} graph breaks)"
    )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"guard_hit": hit, "first_call": first}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
