"""Issue 17 on a GPU: backend="autotune" with its CUDA-only candidates.

A small MLP and a tiny HF GPT-2 (library defaults) on CUDA, inference and a training step,
through backend="autotune" and backend="inductor", each checked against eager. Prints each
graph's decision (candidates timed, medians, the kept one, the evidence), checks that
`inductor-cudagraphs` competed on CUDA (and `max-autotune` when asked), that a second
process reuses the stored decisions without timing, and the per-call time of autotune vs
inductor (interleaved medians). Exit status 1 on any mismatch or missing candidate.

    python3 tools/gpu/autotune_cuda.py            # the check (a child re-runs it with --reuse)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import transformers as T

import ember
from ember.backends import autotune

DEVICE = os.environ.get("CHECK_DEVICE", "cuda")  # cpu: a dry run of the script itself
CUDA = DEVICE == "cuda"
# AUTOTUNE_MAX=1: ask for max-autotune too (mode="max-autotune"), which must then compete
MAX = os.environ.get("AUTOTUNE_MAX") == "1"


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.GELU(),
        torch.nn.Linear(512, 256),
        torch.nn.LayerNorm(256),
    )


def gpt2() -> torch.nn.Module:
    config = T.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=500, n_positions=128)
    return T.GPT2LMHeadModel(config)


MODELS = {
    "mlp": (mlp, lambda: (torch.randn(64, 256, device=DEVICE),)),
    "gpt2": (gpt2, lambda: (torch.randint(0, 500, (4, 64), device=DEVICE),)),
}


def loss_of(out) -> torch.Tensor:
    value = out.logits if hasattr(out, "logits") else out
    return value.float().square().mean()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def per_call_ms(fn, args, calls: int = 50, rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        sync()
        times.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(times)


def check(name: str, train: bool, reuse: bool) -> dict:
    build, inputs = MODELS[name]
    torch.manual_seed(0)
    model = build().to(DEVICE).train(train)
    args = inputs()
    ember.reset()
    autotune.clear_decisions()
    candidates = ["eager", "aot_eager", "inductor"] + (["inductor-cudagraphs"] if CUDA else [])
    candidates += ["max-autotune"] if MAX and CUDA else []
    options = {"candidates": candidates}
    mode = "max-autotune" if MAX else None
    tuned = ember.compile(model, backend="autotune", mode=mode, options=options)
    plain = ember.compile(model, backend="inductor")

    def step(fn):
        model.zero_grad(set_to_none=True)
        out = fn(*args)
        if train:
            loss = loss_of(out)
            loss.backward()
            return loss.detach()
        return out.logits if hasattr(out, "logits") else out

    with torch.no_grad() if not train else torch.enable_grad():
        expected = step(model)
        got = step(tuned)
        torch.testing.assert_close(got, expected, rtol=2e-3, atol=2e-3)
        decisions = autotune.last_decisions()
        result = {
            "model": name, "train": train, "graphs": len(decisions),
            "choices": [d.choice for d in decisions], "sources": [d.source for d in decisions],
            "timed": [sorted(d.timings_ms) for d in decisions],
            "stored": ember.counters["autotune"]["stored"],
        }  # fmt: skip
        for d in decisions:
            timings = ", ".join(f"{n} {ms:.3f} ms" for n, ms in d.timings_ms.items())
            print(f"  {name} {'train' if train else 'infer'}: {d.graph}: {timings} -> "
                  f"{d.choice} ({d.source}) {d.evidence}")  # fmt: skip
        if not reuse:
            step(plain)
            ratios = []
            for _ in range(3):
                ratios.append(
                    per_call_ms(lambda: step(tuned), ()) / per_call_ms(lambda: step(plain), ())
                )
            result["autotune_over_inductor"] = statistics.median(ratios)
    return result


def main() -> int:
    reuse = "--reuse" in sys.argv
    results, failed = [], False
    for name in os.environ.get("AUTOTUNE_MODELS", ",".join(MODELS)).split(","):
        for train in (False, True):
            r = check(name, train, reuse)
            results.append(r)
            wanted = ["inductor-cudagraphs"] + (["max-autotune"] if MAX else [])
            timed_cudagraphs = not CUDA or all(w in t for t in r["timed"] for w in wanted)
            if reuse:
                ok = r["stored"] == r["graphs"] and all(s == "stored" for s in r["sources"])
            else:
                ok = r["graphs"] > 0 and timed_cudagraphs
            failed |= not ok
            print(("ok  " if ok else "FAIL"), json.dumps(r))
    if not reuse:  # a second process: every decision read from disk, nothing timed
        child = subprocess.run([sys.executable, __file__, "--reuse"], env=os.environ, check=False)
        failed |= child.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
