"""Scaled-dot-product attention: eager vs torch.compile vs ember, interleaved in one process.

    python benchmarks/sdpa.py [--reps 30] [--backend inductor] [--threads N]

A BERT-base-sized self-attention (batch 8, 12 heads, sequence 128, head dim 64: hidden 768):
q/k/v projections viewed as heads and transposed as HF does, F.scaled_dot_product_attention
with a padding mask (float, broadcast over heads and queries, as BERT's), the output
projection. Two workloads: the bare attention op on HF-layout q/k/v, and the whole block;
each as inference (no_grad forward) and as a training step (forward + backward). Each rep
times one call of every contender back to back (order rotated); the table gives medians and
the median of per-rep ratios against eager.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import ember

BATCH, HEADS, SEQ, HEAD_DIM = 8, 12, 128, 64
HIDDEN = HEADS * HEAD_DIM


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, HEADS, HEAD_DIM).unbind(2)
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        )
        return self.out(attn.transpose(1, 2).reshape(b, n, HIDDEN))


def bare_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _inputs(requires_grad: bool):
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, HIDDEN, requires_grad=requires_grad)
    keep = torch.ones(BATCH, SEQ)
    keep[:, SEQ - 16 :] = 0  # padded tail, as a BERT batch has
    mask = ((1 - keep) * torch.finfo(torch.float32).min).view(BATCH, 1, 1, SEQ)
    heads = [
        torch.randn(BATCH, SEQ, HEADS, HEAD_DIM).transpose(1, 2).requires_grad_(requires_grad)
        for _ in range(3)
    ]
    return x, mask, heads


def workloads(backend: str) -> dict[str, dict[str, Callable[[], object]]]:
    """workload -> contender -> a no-argument call."""
    block = SelfAttention()
    compiled_block = {
        "eager": block,
        "torch.compile": torch.compile(block),
        "ember": ember.compile(block, backend=backend),
    }
    compiled_bare = {
        "eager": bare_attention,
        "torch.compile": torch.compile(bare_attention),
        "ember": ember.compile(bare_attention, backend=backend),
    }
    x, mask, heads = _inputs(False)
    xg, _, heads_g = _inputs(True)

    def infer(fn, *args):
        def run():
            with torch.no_grad():
                return fn(*args)

        return run

    def train(fn, *args):
        leaves = [a for a in args if a.requires_grad]

        def run():
            out = fn(*args)
            return torch.autograd.grad(out.square().mean(), leaves + list(block.parameters()))

        def run_bare():
            out = fn(*args)
            return torch.autograd.grad(out.square().mean(), leaves)

        return run_bare if fn in compiled_bare.values() else run

    return {
        "sdpa forward": {k: infer(f, *heads, mask) for k, f in compiled_bare.items()},
        "sdpa fwd+bwd": {k: train(f, *heads_g, mask) for k, f in compiled_bare.items()},
        "block forward": {k: infer(f, x, mask) for k, f in compiled_block.items()},
        "block fwd+bwd": {k: train(f, xg, mask) for k, f in compiled_block.items()},
    }


def check(calls: dict[str, Callable[[], object]]) -> None:
    expected = calls["eager"]()
    for name, call in calls.items():
        got = call()
        flat_e = expected if isinstance(expected, tuple) else (expected,)
        flat_g = got if isinstance(got, tuple) else (got,)
        for g, e in zip(flat_g, flat_e, strict=True):
            torch.testing.assert_close(
                g, e, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}"
            )


def measure(calls: dict[str, Callable[[], object]], reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            start = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"SDPA, batch {BATCH}, heads {HEADS}, seq {SEQ}, head dim {HEAD_DIM}, float32 CPU, "
        f"{torch.get_num_threads()} threads, ember backend {args.backend}, {args.reps} reps"
    )
    print("| workload | eager ms | torch.compile ms | ember ms | compile/eager | ember/eager |")
    print("|---|---:|---:|---:|---:|---:|")
    for workload, calls in workloads(args.backend).items():
        for _ in range(args.warmup):
            for call in calls.values():
                call()
        check(calls)
        times = measure(calls, args.reps)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        ratio = {
            k: statistics.median(e / t for e, t in zip(times["eager"], v, strict=True))
            for k, v in times.items()
        }
        print(
            f"| {workload} | {med['eager']:.2f} | {med['torch.compile']:.2f} | "
            f"{med['ember']:.2f} | {ratio['torch.compile']:.2f}x | {ratio['ember']:.2f}x |",
            flush=True,
        )
    print("(ratios: eager time / contender time, median over reps; > 1 is faster than eager)")


if __name__ == "__main__":
    main()
