"""HF BertForMaskedLM and DistilBertForMaskedLM at library defaults on the GPU, batch 8 x 512,
bf16 autocast inference: Ember's logits against eager's (relative error) and ms per call of
eager, torch.compile and Ember (medians of interleaved rounds). One line per model, or the
failure. Checks the fix of the illegal memory access in the softmax after BERT's attention
scores (a compiled graph's float32 `torch.bmm` re-cast to bf16 by the caller's autocast).

    python tools/gpu/bert_check.py [--batch 8] [--seq 512] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
import traceback

import torch
import transformers

import ember

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
        f"{ms['eager'] / ms['ember']:.2f}x"
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
        print(check(name, args.batch, args.seq, args.rounds), flush=True)


if __name__ == "__main__":
    main()
