"""DDP and FSDP2 training of a GPT-2-sized and a Llama-sized model on 2 GPUs: eager vs
torch.compile vs Ember, side by side in one run.

    torchrun --nproc-per-node 2 tools/gpu/distributed_h100x2.py [--out results.json]
    torchrun --nproc-per-node 2 tools/gpu/distributed_h100x2.py --device cpu --tiny   # gloo check

For every (model, wrapper, compiler): tokens/s (all ranks together, median of timed steps),
peak memory per GPU (torch.cuda.max_memory_allocated on each rank; the max over ranks),
and from a torch.profiler trace of two steps the fraction of each collective's time
(all-reduce for DDP, all-gather / reduce-scatter for FSDP2) that overlaps compute: on CUDA
the NCCL kernels' intervals against the union of every other kernel's (backward kernels,
but also DDP's own bucket copies, which is why a one-graph DDP still shows some overlap;
open the traces, --trace-dir, to see which), on the CPU the gloo collectives against the
main thread's aten ops and autograd nodes. Rank 0 prints a table and writes the JSON.
Medians of few steps on a shared host are noisy: use --steps 20 or more for figures.

Wrapping: DDP as `compiler(DDP(model))` (DDP's bucket split happens inside the compiler:
torch.compile's DDPOptimizer, Ember's ember.distributed); FSDP2 as `fully_shard` on each
decoder layer and on the root, then `compiler(model)`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

MODELS = ("gpt2", "llama")
WRAPPERS = ("ddp", "fsdp2")
#: ember-nosplit: Ember with the DDP bucket split off (one graph, every all-reduce after it)
COMPILERS = ("eager", "torch.compile", "ember", "ember-nosplit")


# -- models ----------------------------------------------------------------------------
def build_model(name: str, tiny: bool) -> tuple[torch.nn.Module, int, int, int]:
    """(model, batch, seq, vocab) with random weights (no download)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if name == "gpt2":
        layers, hidden, heads, vocab, batch, seq = (
            (4, 128, 4, 256, 2, 32) if tiny else (12, 768, 12, 50257, 8, 1024)
        )
        config = GPT2Config(
            vocab_size=vocab, n_positions=max(1024, seq), n_embd=hidden, n_layer=layers,
            n_head=heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=vocab - 1, eos_token_id=vocab - 1, use_cache=False,
        )  # fmt: skip
        model = GPT2LMHeadModel(config)
    else:
        # TinyLlama's shape (1.1B parameters) on the GPUs
        layers, hidden, heads, kv, inter, vocab, batch, seq = (
            (4, 128, 4, 2, 256, 256, 2, 32) if tiny else (22, 2048, 32, 4, 5632, 32000, 4, 1024)
        )
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
            num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
            max_position_embeddings=max(2048, seq), use_cache=False,
        )  # fmt: skip
        model = LlamaForCausalLM(config)
    model.loss_type = "ForCausalLM"
    return model, batch, seq, vocab


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    inner = getattr(model, "transformer", None) or model.model
    return list(getattr(inner, "h", None) or inner.layers)


# -- wrapping and compiling --------------------------------------------------------------
def wrap(
    model: torch.nn.Module, wrapper: str, device: torch.device, bucket_cap_mb: float | None
) -> torch.nn.Module:
    if wrapper == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return DDP(model, device_ids=ids, bucket_cap_mb=bucket_cap_mb)
    from torch.distributed.fsdp import fully_shard

    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    return model


def compile_with(compiler: str, model: torch.nn.Module) -> Callable:
    if compiler == "eager":
        return model
    if compiler == "torch.compile":
        return torch.compile(model)
    import ember

    ember.config.optimize_ddp = compiler != "ember-nosplit"
    return ember.compile(model)


# -- measuring ---------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(run: Callable, params: list, batch: dict, device: torch.device) -> Callable:
    optimizer = torch.optim.AdamW(params, lr=1e-4, foreach=True)

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = run(**batch).loss
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def covered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Total length of `intervals` (merged) that lies inside `cover` (merged)."""
    total, j = 0.0, 0
    for start, end in intervals:
        while j < len(cover) and cover[j][1] <= start:
            j += 1
        k = j
        while k < len(cover) and cover[k][0] < end:
            total += min(end, cover[k][1]) - max(start, cover[k][0])
            k += 1
    return total


COLLECTIVE_KINDS = {
    "all_reduce": ("allreduce", "all_reduce"),
    "all_gather": ("allgather", "all_gather"),
    "reduce_scatter": ("reducescatter", "reduce_scatter"),
}


CPU_COMPUTE = ("aten::", "autograd::engine::evaluate_function")


def _kind(name: str) -> str | None:
    flat = name.lower().replace(":", "_")
    for kind, keys in COLLECTIVE_KINDS.items():
        if any(k in flat.replace("_", "") or k in flat for k in keys):
            return kind
    return None


def overlap_summary(prof: Any, device: torch.device) -> dict[str, dict[str, float]]:
    """Per collective kind: its total time (ms) and the fraction overlapped by compute."""
    events = [e for e in prof.events() if e.time_range.end > e.time_range.start]
    if device.type == "cuda":
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        comm = [e for e in kernels if "nccl" in e.name.lower()]
        compute = [e for e in kernels if "nccl" not in e.name.lower()]
    else:
        # gloo runs collectives on its own threads; compute is the main thread's aten ops
        # and autograd nodes (a compiled graph's C++ kernels are no profiler events, but
        # its backward runs inside an evaluate_function span)
        comm = [e for e in events if "gloo" in e.name.lower() and _kind(e.name)]
        main = [e for e in events if e.name.startswith(CPU_COMPUTE)]
        thread = statistics.mode(e.thread for e in main) if main else None
        compute = [e for e in main if e.thread == thread]
    cover = merged([(e.time_range.start, e.time_range.end) for e in compute])
    summary: dict[str, dict[str, float]] = {}
    for kind in COLLECTIVE_KINDS:
        spans = merged(
            [(e.time_range.start, e.time_range.end) for e in comm if _kind(e.name) == kind]
        )
        total = sum(end - start for start, end in spans)
        if total > 0:
            summary[kind] = {
                "ms": round(total / 1000, 3),
                "overlapped": round(covered(spans, cover) / total, 3),
            }
    return summary


def measure(args, name: str, wrapper: str, compiler: str, device: torch.device) -> dict:
    torch.manual_seed(0)
    model, batch_size, seq, vocab = build_model(name, args.tiny)
    model = model.to(device=device, dtype=args.dtype)
    wrapped = wrap(model, wrapper, device, args.bucket_cap_mb)
    run = compile_with(compiler, wrapped)
    generator = torch.Generator().manual_seed(1234 + dist.get_rank())
    ids = torch.randint(0, vocab, (batch_size, seq), generator=generator).to(device)
    step = make_step(run, list(wrapped.parameters()), {"input_ids": ids, "labels": ids}, device)
    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync(device)
    warmup_s = time.perf_counter() - start
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss = step()
        sync(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(2):
            step()
        sync(device)
    if args.trace_dir and dist.get_rank() == 0:
        os.makedirs(args.trace_dir, exist_ok=True)
        prof.export_chrome_trace(
            os.path.join(args.trace_dir, f"{name}_{wrapper}_{compiler.replace('.', '_')}.json")
        )
    median = statistics.median(times)
    tokens = batch_size * seq * dist.get_world_size()
    peaks = [None] * dist.get_world_size()
    dist.all_gather_object(peaks, peak)
    result = {
        "model": name, "wrapper": wrapper, "compiler": compiler,
        "tokens_per_s": round(tokens / median, 1), "step_ms": round(median * 1000, 2),
        "warmup_s": round(warmup_s, 2), "peak_gib_per_gpu": round(max(peaks), 3),
        "loss": float(loss), "collectives": overlap_summary(prof, device),
    }  # fmt: skip
    if compiler.startswith("ember"):
        import ember

        result["ember_counters"] = {
            k: dict(v) for k, v in ember.counters.items() if k in ("ddp", "inductor")
        }
        ember.reset()
    if compiler == "torch.compile":
        torch._dynamo.reset()
    del step, run, wrapped, model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def table(results: list[dict]) -> str:
    lines = [
        f"{'model':7} {'wrapper':6} {'compiler':14} {'tokens/s':>11} {'vs eager':>8} "
        f"{'step ms':>9} {'peak GiB':>9}  collectives (ms, overlapped)"
    ]
    eager = {(r["model"], r["wrapper"]): r for r in results if r["compiler"] == "eager"}
    for r in results:
        base = eager.get((r["model"], r["wrapper"]))
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x" if base else "-"
        comm = ", ".join(
            f"{k} {v['ms']:.1f} {v['overlapped']:.0%}" for k, v in r["collectives"].items()
        )
        lines.append(
            f"{r['model']:7} {r['wrapper']:6} {r['compiler']:14} {r['tokens_per_s']:>11.1f} "
            f"{ratio:>8} {r['step_ms']:>9.2f} {r['peak_gib_per_gpu']:>9.3f}  {comm}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small models (a quick check)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--wrappers", nargs="+", choices=WRAPPERS, default=list(WRAPPERS))
    parser.add_argument("--compilers", nargs="+", choices=COMPILERS, default=list(COMPILERS))
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default=None)
    parser.add_argument(
        "--bucket-cap-mb", type=float, default=None, help="DDP's bucket cap (default: DDP's)"
    )
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default="distributed_h100x2.json")
    parser.add_argument("--trace-dir", default=None, help="write each profiler trace here")
    args = parser.parse_args()
    args.dtype = getattr(torch, args.dtype or ("bfloat16" if args.device == "cuda" else "float32"))
    if args.tiny and args.bucket_cap_mb is None:
        # several buckets, as real models have (tiny ones fit DDP's default 25 MiB); not
        # below DDP's 1 MiB first bucket, which torch.compile's DDPOptimizer refuses
        args.bucket_cap_mb = 1.0

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    results = []
    try:
        for name in args.models:
            for wrapper in args.wrappers:
                for compiler in args.compilers:
                    try:
                        result = measure(args, name, wrapper, compiler, device)
                    except Exception as exc:  # one failing combination does not stop the rest
                        result = {"model": name, "wrapper": wrapper, "compiler": compiler,
                                  "error": f"{type(exc).__name__}: {exc}"[:2000]}  # fmt: skip
                        if dist.get_rank() == 0:
                            print(
                                f"FAILED {name} {wrapper} {compiler}: {result['error']}", flush=True
                            )
                    results.append(result)
                    if dist.get_rank() == 0 and "error" not in result:
                        print(json.dumps(result), flush=True)
                    dist.barrier()
        if dist.get_rank() == 0:
            print(table([r for r in results if "error" not in r]))
            with open(args.out, "w") as f:
                json.dump({"device": str(device), "world_size": dist.get_world_size(),
                           "dtype": str(args.dtype), "results": results}, f, indent=1)  # fmt: skip
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
