"""Compile real models through Ember's frame hook and tracer, and show what came out.

Each zoo model is compiled with `ember.compile` (eager backend: the graphs run as traced,
so this shows capture, not speed), checked against eager PyTorch, and explained: how many
graphs, how many ops in them, and where and why the graph broke.

    python examples/tracer_demo.py [model ...]     # default: transformer_block gpt2
"""

from __future__ import annotations

import sys

import torch

import ember
from ember_zoo import build, output_tensors


def show(name: str) -> None:
    case = build(name, "tiny")
    compiled = ember.compile(case.model, backend="eager")
    with torch.no_grad():
        got = compiled(*case.example_inputs, **case.example_kwargs)
        expected = case.model(*case.example_inputs, **case.example_kwargs)
    pairs = list(zip(output_tensors(got), output_tensors(expected), strict=True))
    worst = max(float((g - e).abs().max()) for g, e in pairs)
    report = ember.explain(case.model)(*case.example_inputs, **case.example_kwargs)
    ops = [len(o) for o in report.ops_per_graph]
    print(f"\n=== {name}: {report.graph_count} graphs, {sum(ops)} ops, "
          f"{report.graph_break_count} graph breaks; max |compiled - eager| = {worst:.2e}")  # fmt: skip
    for i, graph_ops in enumerate(report.ops_per_graph[:4]):
        print(f"  graph {i}: {', '.join(graph_ops[:12])}{' ...' if len(graph_ops) > 12 else ''}")
    if report.graph_count > 4:
        print(f"  ... {report.graph_count - 4} more graphs")
    seen = set()
    for brk in report.breaks:
        if brk.reason not in seen:
            seen.add(brk.reason)
            print(f"  break: {brk.reason[:90]}\n         at {brk.location}")
    assert worst < 1e-4, "compiled result differs from eager"


def main(argv: list[str]) -> None:
    for name in argv or ["transformer_block", "gpt2"]:
        show(name)


if __name__ == "__main__":
    main(sys.argv[1:])
