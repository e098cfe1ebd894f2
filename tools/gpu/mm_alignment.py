"""How cuBLAS times a bf16 matmul whose output row has an odd length (an LM head over a
vocabulary of 50265, as Bart's): the product as eager lays it out, with a padded output row
stride, with the weight padded to a multiple of 8 rows, and as the transpose of the swapped
product; and what torch.compile makes of the same linear (its output strides and code).

    python tools/gpu/mm_alignment.py [--m 4096 --k 1024 --n 50265]
"""

from __future__ import annotations

import argparse
import os

import torch


def _time(fn, reps: int = 50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--n", type=int, default=50265)
    args = parser.parse_args()
    m, k, n = args.m, args.k, args.n
    padded = (n + 7) // 8 * 8
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    w_pad = torch.zeros(padded, k, device="cuda", dtype=torch.bfloat16)
    w_pad[:n] = w
    out_pad = torch.empty(m, padded, device="cuda", dtype=torch.bfloat16)
    ref = torch.mm(x, w.t())
    variants = {
        "eager mm(x, w.t())": lambda: torch.mm(x, w.t()),
        "out row stride padded": lambda: torch.mm(x, w.t(), out=out_pad[:, :n]),
        "weight rows padded, sliced": lambda: torch.mm(x, w_pad.t())[:, :n],
        "swapped, transposed (w @ x.t()).t()": lambda: torch.mm(w, x.t()).t(),
    }
    for name, fn in variants.items():
        got = fn()
        err = (got.float() - ref.float()).abs().max().item()
        print(f"{name:40s} {_time(fn):8.3f} ms  strides {tuple(got.stride())}  max diff {err:.3g}")

    wf = torch.randn(n, k, device="cuda")
    xf = torch.randn(m, k, device="cuda")

    def linear(a, b):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return torch.nn.functional.linear(a, b)

    os.environ.setdefault("TORCH_LOGS", "")
    compiled = torch.compile(linear)
    out = compiled(xf, wf)
    print("torch.compile output strides", tuple(out.stride()), out.dtype)
    print(f"eager linear {_time(lambda: linear(xf, wf)):.3f} ms")
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(linear), xf, wf)
    for code in codes:
        for line in code.splitlines():
            if "extern_kernels" in line or "empty_strided" in line or "reinterpret" in line:
                print("   ", line.strip()[:220])
    import ember

    for name, fn in (("torch.compile", compiled), ("ember", ember.compile(linear))):
        out = fn(xf, wf)
        print(f"{name}: {_time(lambda fn=fn: fn(xf, wf)):.3f} ms, strides {tuple(out.stride())}")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn(xf, wf)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=5))


if __name__ == "__main__":
    main()
