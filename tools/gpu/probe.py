"""Diagnostics on the lent GPU for one model at a time: where Ember's time and memory go
(a profiler table of its top CUDA kernels beside torch.compile's, peak memory of each), or,
with --sync, which kernel of Ember's wrapper faults (CUDA_LAUNCH_BLOCKING set by the caller).

    python tools/gpu/probe.py convnext_tiny [--batch 32] [--fp32]
    CUDA_LAUNCH_BLOCKING=1 python tools/gpu/probe.py BertForMaskedLM --hf --batch 8
"""

from __future__ import annotations

import argparse
import sys
import traceback

import torch

import ember

sys.path.insert(0, "benchmarks/suites")


def build(args: argparse.Namespace) -> tuple[torch.nn.Module, dict]:
    if args.hf:
        import transformers

        cls = getattr(transformers, args.model)
        config = cls.config_class()
        model = cls(config).cuda().eval()
        ids = torch.randint(0, min(config.vocab_size, 30000), (args.batch, args.seq), device="cuda")
        return model, {"input_ids": ids}
    from vision_import import import_timm

    timm = import_timm()
    model = timm.create_model(args.model, pretrained=False).cuda().eval()
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    return model, {"x": x}


def call(fn, inputs: dict):
    return fn(**inputs) if "input_ids" in inputs else fn(inputs["x"])


def profile(name: str, fn, inputs: dict, autocast: bool) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=autocast):
        for _ in range(3):
            call(fn, inputs)
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            call(fn, inputs)
        end.record()
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            call(fn, inputs)
            torch.cuda.synchronize()
    print(f"== {name}: {start.elapsed_time(end) / 10:.2f} ms/call, peak {peak:.0f} MB over inputs")
    print(
        p.key_averages().table(
            sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=70
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--hf", action="store_true")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--sync", action="store_true", help="only run Ember once, report a fault")
    args = parser.parse_args()
    torch.manual_seed(0)
    model, inputs = build(args)
    autocast = not args.fp32
    if args.sync:
        try:
            with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=autocast):
                call(ember.compile(model), inputs)
                torch.cuda.synchronize()
            print("RESULT no fault")
        except Exception:
            traceback.print_exc()
        return
    profile("eager", model, inputs, autocast)
    profile("torch.compile", torch.compile(model), inputs, autocast)
    profile("ember", ember.compile(model), inputs, autocast)
    print("ember counters", dict(ember.counters["inductor"]))


if __name__ == "__main__":
    main()
