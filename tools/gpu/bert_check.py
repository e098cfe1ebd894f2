"""HF BertForMaskedLM and DistilBertForMaskedLM at library defaults on the GPU, batch 8 x 512,
bf16 autocast inference: Ember's logits against eager's (relative error) and ms per call of
eager, torch.compile and Ember (medians of interleaved rounds). One line per model, or the
failure. Checks the fix of the illegal memory access in the softmax after BERT's attention
scores (a compiled graph's float32 `torch.bmm` re-cast to bf16 by the caller's autocast).
Also prints each runner's peak memory over one call (above what was allocated before it) and
the attention prims in Ember's graphs: traced, transformers passes an all-true (B, 1, L, L)
mask of stride-0 last dim that aten's fused CUDA kernels refuse; Ember drops it (flash, as
eager without a mask), so `sdpa_flash_cuda` and no `bmm` are expected.

    python tools/gpu/bert_check.py [--batch 8] [--seq 512] [--rounds 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time
import traceback

import torch
import transformers

import ember
from ember.backends import inductor

MODELS = ("BertForMaskedLM", "DistilBertForMaskedLM")


def _model(name: str) -> torch.nn.Module:
    cls = getattr(transformers, name)
    config = cls.config_class()
    for key, value in vars(config).items():  # dropout off: compared with eager
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    torch.manual_seed(0)
    return cls(config).cuda().eval()


def _ms(fn, ids: torch.Tensor, calls: int = 5) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(input_ids=ids)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / calls


PRIMS: collections.Counter = collections.Counter()
_compile_prims = inductor.PrimCompiler.__call__


def _spied(compiler, gm, example_inputs):
    """Counts the attention prims and batched matmuls of the prim graphs Ember compiles."""
    for node in gm.graph.nodes:
        name = str(node.target).removeprefix("ember_prims.").removesuffix(".default")
        if node.op == "call_function" and (name.startswith("sdpa") or name == "bmm"):
            PRIMS[name] += 1
    return _compile_prims(compiler, gm, example_inputs)


inductor.PrimCompiler.__call__ = _spied
os.environ.setdefault("EMBER_ARTIFACT_CACHE", "0")  # compiled here, so the spy sees the graphs


def _peak_mb(fn, ids: torch.Tensor) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn(input_ids=ids)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def check(name: str, batch: int, seq: int, rounds: int) -> str:
    model = _model(name)
    ids = torch.randint(0, 30000, (batch, seq), device="cuda")
    runners = {
        "eager": model,
        "torch.compile": torch.compile(model),
        "ember": ember.compile(model),
    }
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
        expected = model(input_ids=ids).logits.float()
        try:
            for fn in runners.values():  # compile and warm up
                fn(input_ids=ids)
            got = runners["ember"](input_ids=ids).logits.float()
            torch.cuda.synchronize()
        except Exception as exc:
            traceback.print_exc()
            return f"{name}: FAIL {type(exc).__name__}: {exc}"
        peaks = {key: _peak_mb(fn, ids) for key, fn in runners.items()}
        times: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(rounds):  # interleaved
            for key, fn in runners.items():
                times[key].append(_ms(fn, ids))
    error = ((got - expected).norm() / expected.norm()).item()
    ms = {k: statistics.median(v) for k, v in times.items()}
    graphs = ember.counters["inductor"].get("forward_graphs")
    return (
        f"{name}: rel_err {error:.2e} graphs {graphs} | ms/call eager {ms['eager']:.2f} "
        f"torch.compile {ms['torch.compile']:.2f} ember {ms['ember']:.2f} | speedup over eager "
        f"torch.compile {ms['eager'] / ms['torch.compile']:.2f}x ember "
        f"{ms['eager'] / ms['ember']:.2f}x | peak MB eager {peaks['eager']:.0f} "
        f"torch.compile {peaks['torch.compile']:.0f} ember {peaks['ember']:.0f} | ember prims "
        f"{dict(PRIMS)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    for name in args.models:
        ember.reset()
        PRIMS.clear()
        print(check(name, args.batch, args.seq, args.rounds), flush=True)


if __name__ == "__main__":
    main()
