"""Dynamic shapes: a stream of calls whose sequence length changes, eager vs
``torch.compile(dynamic=None)`` vs Ember (``dynamic=None``), in one process.

Per model, one stream of ``--calls`` calls (64 by default): BERT over random lengths,
GPT-2 and Llama as a no-cache generation loop (the whole prefix again at every step, one
token longer each time). Every call runs under each compiler in turn (interleaved, so load
drift hits every column alike). Reported per compiler:

- total: the wall time of the whole stream, compilation included;
- steady: the median per-call time over the last 16 calls;
- graphs: how many graphs the compiler built (Ember: counted by its backend hook);
- static ratio: Ember's dynamic per-call time over a static-shape Ember compile of the same
  lengths (the last ``--static-lengths`` lengths, each compiled with ``dynamic=False``), both
  timed warm as the median of ``--repeats`` calls per length.

Targets (issue 13): Ember's total at most torch.compile's; steady within 10% of static.

    python benchmarks/dynamic_shapes.py --models bert,gpt2,llama --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch

import ember

SIZES = {
    # layers, hidden, heads, vocab
    "tiny": (2, 64, 4, 256),
    "small": (4, 256, 4, 2048),
}


@dataclass
class Stream:
    model: torch.nn.Module
    inputs: list[dict[str, torch.Tensor]]  # one kwargs dict per call


def _bert(size: str, calls: int, rng: random.Random) -> Stream:
    from transformers import BertConfig, BertModel

    layers, hidden, heads, vocab = SIZES[size]
    config = BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=4 * hidden,
    )  # fmt: skip
    model = BertModel(config).eval()
    lengths = [rng.randint(16, 128) for _ in range(calls)]
    inputs = [{"input_ids": torch.randint(0, vocab, (2, n))} for n in lengths]
    return Stream(model, inputs)


def _decoder(family: str, size: str, calls: int) -> Stream:
    layers, hidden, heads, vocab = SIZES[size]
    if family == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
            bos_token_id=vocab - 1, eos_token_id=vocab - 1,
        )  # fmt: skip
        model = GPT2LMHeadModel(config).eval()
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
            intermediate_size=4 * hidden,
        )  # fmt: skip
        model = LlamaForCausalLM(config).eval()
    tokens = torch.randint(0, vocab, (1, 4 + calls))
    # a no-cache generation loop: the whole prefix again at every step, one token longer
    inputs = [{"input_ids": tokens[:, : 4 + i], "use_cache": False} for i in range(calls)]
    return Stream(model, inputs)


MODELS: dict[str, Callable[[str, int, random.Random], Stream]] = {
    "bert": _bert,
    "gpt2": lambda size, calls, rng: _decoder("gpt2", size, calls),
    "llama": lambda size, calls, rng: _decoder("llama", size, calls),
}


@dataclass
class Column:
    name: str
    fn: Callable[..., Any]
    times: list[float] = field(default_factory=list)
    graphs: Callable[[], int | None] = lambda: None


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if hasattr(out, "logits"):
        return out.logits
    return out[0]


def _counting_backend() -> tuple[Callable, list[int]]:
    """Ember's default backend, counting the graphs it is handed."""
    count = [0]
    inductor = ember.lookup_backend("inductor")

    def backend(gm, example_inputs):
        count[0] += 1
        return inductor(gm, example_inputs)

    return ember.backends.symbolic_sizes(backend), count  # inductor's: right for every size


def _reset_dynamo() -> None:
    import torch._dynamo.utils  # the oracle may use torch internals; Ember's packages may not

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def _dynamo_graphs() -> int | None:
    try:
        from torch._dynamo.utils import counters  # the oracle may use torch internals
    except ImportError:
        return None
    return int(counters["stats"]["unique_graphs"])


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _to(kwargs: dict[str, Any], device: str) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}


def run_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    stream = MODELS[name](args.size, args.calls, random.Random(0))
    model = stream.model.to(args.device)
    stream.inputs = [_to(kwargs, args.device) for kwargs in stream.inputs]
    ember.reset()
    _reset_dynamo()
    backend, ember_count = _counting_backend()
    columns = [
        Column("eager", model),
        Column("torch.compile", torch.compile(model, dynamic=None), graphs=_dynamo_graphs),
        Column("ember", ember.compile(model, backend=backend), graphs=lambda: ember_count[0]),
    ]
    worst = 0.0
    with torch.no_grad():
        for kwargs in stream.inputs:
            reference = None
            for column in columns:
                _sync(args.device)
                start = time.perf_counter()
                out = column.fn(**kwargs)
                _sync(args.device)
                column.times.append(time.perf_counter() - start)
                value = _first_tensor(out)
                if reference is None:
                    reference = value
                else:
                    worst = max(worst, (value - reference).abs().max().item())
        tail = stream.inputs[-args.static_lengths :]
        # the dynamic compile at the same lengths, timed as the static one is (warm, the
        # median of repeats): one streamed call per length measured noise at ~2 ms per call
        dynamic = [_repeated(columns[2].fn, kw, args.repeats, args.device) for kw in tail]
        static = _static_reference(model, tail, args.repeats, args.device)
    tail = 16
    result: dict[str, Any] = {"model": name, "calls": len(stream.inputs), "max_abs_diff": worst}
    for column in columns:
        result[column.name] = {
            "total_s": sum(column.times),
            "steady_ms": 1e3 * statistics.median(column.times[-tail:]),
            "graphs": column.graphs(),
        }
    result["ember_static_ms"] = 1e3 * statistics.median(static)
    result["dynamic_over_static"] = statistics.median(
        d / s for d, s in zip(dynamic, static, strict=True)
    )
    return result


def _repeated(fn: Callable, kwargs: dict[str, Any], repeats: int, device: str) -> float:
    """The median wall time of `repeats` calls of an already warm `fn(**kwargs)`."""
    samples = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn(**kwargs)
        _sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _static_reference(model, inputs, repeats: int, device: str) -> list[float]:
    """Per length, a static-shape Ember compile (dynamic=False), warmed, then timed."""
    medians = []
    for kwargs in inputs:
        ember.reset()
        static = ember.compile(model, dynamic=False)
        static(**kwargs)
        medians.append(_repeated(static, kwargs, repeats, device))
    ember.reset()
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,gpt2,llama")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument("--static-lengths", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = [run_model(name, args) for name in args.models.split(",")]
    header = f"{'model':8} {'compiler':14} {'total s':>9} {'steady ms':>10} {'graphs':>7}"
    print(header)
    for r in results:
        for name in ("eager", "torch.compile", "ember"):
            c = r[name]
            print(
                f"{r['model']:8} {name:14} {c['total_s']:9.2f} {c['steady_ms']:10.2f} "
                f"{c['graphs'] if c['graphs'] is not None else '-':>7}"
            )
        print(
            f"{r['model']:8} ember static {r['ember_static_ms']:.2f} ms; dynamic/static "
            f"{r['dynamic_over_static']:.2f}x; max |diff| {r['max_abs_diff']:.1e}"
        )
    if args.json:
        meta = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
            "machine": (
                torch.cuda.get_device_name()
                if args.device == "cuda"
                else platform.processor() or platform.machine()
            ),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "args": vars(args),
        }
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1, default=asdict)


if __name__ == "__main__":
    main()
