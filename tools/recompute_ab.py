"""The min-cut partition with and without its recompute bounds, side by side (CPU).

    python tools/recompute_ab.py vit-probe resnet-blocks convnext-blocks [--rounds 30]

For each model (tools/saved_activations.py's builders) and each variant, one training step
(forward and loss under CPU bf16 autocast, `loss.backward()`) is compiled by Ember's
inductor backend: "before" with the recompute chain unbounded and the backward's recomputed
values left where the joint graph had them (at its start), "after" as the partitioner is.
Printed per variant: kernels generated, the most outputs of one kernel, saved activation
bytes, the CPU step time (median of interleaved rounds), its gradients' largest difference
from eager's, and whether both variants' gradients are equal bit for bit. The artifact
cache is off (each variant is partitioned afresh); each run uses a fresh kernel cache.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="recompute-ab-"))
os.environ["EMBER_ARTIFACT_CACHE"] = "0"
os.environ.setdefault("EMBER_LOGS", "output_code")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember
from ember_aot_autograd import observe_partitions
from ember_aot_autograd.partition import common, mincut
from saved_activations import build

# a kernel's header in its source (unindented; its wrapper's indented comment repeats it)
HEADER = re.compile(r"^(?://|#) (kernel\d+): loops (.*)", re.MULTILINE)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.text.append(record.getMessage())


def unbounded(on: bool) -> None:
    """Switches the partitioner to the old behaviour (on) or back (off)."""
    if not hasattr(unbounded, "saved"):
        unbounded.saved = (mincut.MAX_RECOMPUTE_CHAIN, common.recompute_late)
    chain, late = unbounded.saved
    mincut.MAX_RECOMPUTE_CHAIN = 10**9 if on else chain
    common.recompute_late = (lambda graph, tangents: None) if on else late


def compile_variant(name: str, layers: int | None, before: bool):
    model, inputs, loss_of = build(name, layers)
    params = list(model.parameters())

    def step():
        for p in params:
            p.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_of(model(**inputs))
        loss.backward()
        return loss.detach()

    handler = Records()
    logger = logging.getLogger("ember.output_code")
    logger.addHandler(handler)
    unbounded(before)
    try:
        with observe_partitions() as parts:
            compiled = ember.compile(step, backend="inductor")
            compiled()
    finally:
        unbounded(False)
        logger.removeHandler(handler)
    heads = HEADER.findall("\n".join(handler.text))
    outputs = [len(re.findall(r"\((?:full|outer|reduction)\)", h)) for _, h in heads]
    saved = sum(p.report.saved_activation_bytes for p in parts)
    stats = {"kernels": len(heads), "max outputs": max(outputs, default=0), "saved bytes": saved}
    return compiled, step, params, stats


def grads(fn, params) -> list[torch.Tensor]:
    fn()
    return [p.grad.clone() for p in params]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    for name in args.models:
        variants = {
            v: compile_variant(name, args.layers, v == "before") for v in ("before", "after")
        }
        eager = grads(variants["after"][1], variants["after"][2])
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for v, (compiled, *_rest) in variants.items():
                start = time.perf_counter()
                compiled()
                times[v].append(time.perf_counter() - start)
        got = {v: grads(compiled, params) for v, (compiled, _s, params, _t) in variants.items()}
        for v, (_compiled, _step, _params, stats) in variants.items():
            pairs = list(zip(got[v], eager, strict=True))
            worst = max((a.float() - b.float()).abs().max().item() for a, b in pairs)
            ms = statistics.median(times[v]) * 1e3
            print(f"{name:<16} {v:<7} " + " ".join(f"{k}={x}" for k, x in stats.items())
                  + f" step_ms={ms:.2f} max_grad_diff_vs_eager={worst:.3g}", flush=True)  # fmt: skip
        same = all(torch.equal(a, b) for a, b in zip(got["before"], got["after"], strict=True))
        print(f"{name:<16} gradients before == after bit for bit: {same}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
