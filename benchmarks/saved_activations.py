"""Bytes saved for backward by each ember-aot-autograd partitioner on the model zoo.

    python benchmarks/saved_activations.py [--size tiny|real] [--models mlp,cnn] [--aten]

Traces each zoo model's training loss through autograd (aten level with --aten, else with
ember-primops' decomposition table, as the aot_eager and inductor backends do), partitions
the joint graph with the default and the min-cut partitioner, and prints the activation
bytes each saves (saved values that are not graph inputs), with their ratio.
"""

from __future__ import annotations

import argparse
import time

import torch

import ember_zoo
from ember_aot_autograd import partition_report


class TrainingLoss(torch.nn.Module):
    """A zoo case's model and loss as one module: the function whose joint graph is split."""

    def __init__(self, case: ember_zoo.ZooCase):
        super().__init__()
        self.model = case.model
        self.case = case

    def forward(self, *inputs):
        return self.case.loss(self.model(*inputs, **self.case.example_kwargs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=ember_zoo.SIZES)
    parser.add_argument("--models", default=",".join(ember_zoo.names()))
    parser.add_argument("--aten", action="store_true", help="no decomposition table")
    args = parser.parse_args()
    table = None
    if not args.aten:
        from ember_primops import decomposition_table

        table = decomposition_table()
    level = "aten" if args.aten else "prims"
    print(f"activation bytes saved for backward ({args.size} models, {level}-level graphs)")
    print("| model | default | min-cut | min-cut / default | trace s |\n|---|---:|---:|---:|---:|")
    for name in args.models.split(","):
        case = ember_zoo.build(name, args.size, seed=0)
        start = time.perf_counter()
        report = partition_report(TrainingLoss(case), list(case.example_inputs), table)
        default = report["default"].saved_activation_bytes
        min_cut = report["min_cut"].saved_activation_bytes
        ratio = min_cut / max(default, 1)
        elapsed = time.perf_counter() - start
        print(f"| {name} | {default:,} | {min_cut:,} | {ratio:.2f} | {elapsed:.1f} |", flush=True)


if __name__ == "__main__":
    main()
