"""Kernel quality on a GPU: achieved bytes/s of Ember's generated kernels against the
device-to-device copy bandwidth measured in the same run (issue 6's targets: at least 85% for
pointwise, 75% for reductions), with eager PyTorch and torch.compile alongside.

Cases (float32 and bfloat16): a chain of 10 pointwise ops, softmax and layernorm over rows,
and a sum over a large tensor. Bytes = every input read once + every output written once;
time = median of `triton.testing.do_bench` (CUDA events). Each compiled result is checked
against eager first.

Matmul (``--only matmul``, part of the default run): Ember's Triton matmul template with its
fused epilogue against aten (cuBLAS) for a 4096^3 mm and a linear + gelu 8192x4096 -> 4096,
in float16, bfloat16 and float32: eager, Ember default (aten + an epilogue kernel), Ember with
the template forced (EMBER_TRITON_MATMUL=template) and Ember under max-autotune with what it
picked and the timings of its own benchmark (from the ``ember.autotune`` log).

    python benchmarks/gpu_kernels.py [--numel 268435456] [--only all|bandwidth|matmul]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F


def pointwise_chain(x: torch.Tensor) -> torch.Tensor:
    y = x * 1.5 + 0.25
    y = torch.relu(y) - 0.5
    y = torch.sigmoid(y) * y
    y = torch.tanh(y) + x
    y = y * y - 0.125
    return torch.abs(y) + 1.0


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layernorm_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def total_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum()


@dataclass
class Case:
    name: str
    kind: str  # pointwise | reduction
    fn: Callable
    make_inputs: Callable[[torch.dtype], tuple]
    target: float  # fraction of the copy bandwidth


def cases(numel: int, row: int) -> list[Case]:
    rows = numel // row

    def flat(dtype):
        return (torch.randn(numel, device="cuda", dtype=dtype),)

    def matrix(dtype):
        return (torch.randn(rows, row, device="cuda", dtype=dtype),)

    def normed(dtype):
        x = torch.randn(rows, row, device="cuda", dtype=dtype)
        weight = torch.randn(row, device="cuda", dtype=dtype)
        return x, weight, torch.randn(row, device="cuda", dtype=dtype)

    return [
        Case("pointwise_chain", "pointwise", pointwise_chain, flat, 0.85),
        Case("softmax", "reduction", softmax_rows, matrix, 0.75),
        Case("layernorm", "reduction", layernorm_rows, normed, 0.75),
        Case("sum", "reduction", total_sum, flat, 0.75),
    ]


def moved_bytes(inputs: tuple, output: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in (*inputs, output))


def bench_ms(fn: Callable[[], object]) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=50, rep=300, return_mode="median")


def copy_bandwidth(numel: int) -> float:
    """Bytes/s of a device-to-device copy (bytes read + bytes written)."""
    src = torch.randn(numel, device="cuda")
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


def compilers() -> dict[str, Callable[[Callable], Callable]]:
    import ember

    return {
        "eager": lambda fn: fn,
        "torch.compile": torch.compile,
        "ember": lambda fn: ember.compile(fn, fullgraph=True),
    }


def mm_only(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.linear(x, weight, bias))


def matmul_cases() -> list[tuple[str, Callable, Callable[[torch.dtype], tuple], int]]:
    """(name, fn, make_inputs, flops)."""

    def square(dtype):
        return tuple(torch.randn(4096, 4096, device="cuda", dtype=dtype) for _ in range(2))

    def linear(dtype):
        x = torch.randn(8192, 4096, device="cuda", dtype=dtype)
        weight = torch.randn(4096, 4096, device="cuda", dtype=dtype) / 64
        return x, weight, torch.randn(4096, device="cuda", dtype=dtype)

    return [
        ("mm 4096x4096x4096", mm_only, square, 2 * 4096**3),
        ("linear+gelu 8192x4096->4096", linear_gelu, linear, 2 * 8192 * 4096 * 4096),
    ]


class _Decisions(logging.Handler):
    """Collects the matmul decisions Ember logs on ember.autotune."""

    PATTERN = re.compile(r"matmul (.*?): (template|aten) (wins|forced|\(cached)(.*)")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.PATTERN.match(message):
            self.lines.append(message)


def _ember_variant(fn: Callable, mode: str | None, policy: str) -> Callable:
    import ember

    ember.reset()
    os.environ["EMBER_TRITON_MATMUL"] = policy
    return ember.compile(fn, mode=mode, fullgraph=True)


def matmul_section() -> list[dict]:
    """aten vs the template (with its epilogue) per case and dtype; what max-autotune picks."""
    variants = {
        "ember default (aten)": (None, "aten"),
        "ember template (forced)": ("max-autotune-no-cudagraphs", "template"),
        "ember max-autotune": ("max-autotune-no-cudagraphs", "auto"),
    }
    logger = logging.getLogger("ember.autotune")
    decisions = _Decisions()
    logger.addHandler(decisions)
    saved_level, saved_policy = logger.level, os.environ.get("EMBER_TRITON_MATMUL")
    logger.setLevel(logging.INFO)
    results = []
    print("\n| matmul | dtype | eager | " + " | ".join(variants) + " | max-autotune picked |")
    print("|---|---|---:|" + "---:|" * len(variants) + "---|")
    try:
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for name, fn, make_inputs, flops in matmul_cases():
                inputs = make_inputs(dtype)
                expected = fn(*inputs)
                row: dict = {"case": name, "dtype": str(dtype).removeprefix("torch.")}
                row["eager"] = {"ms": bench_ms(lambda fn=fn, inputs=inputs: fn(*inputs))}
                for label, (mode, policy) in variants.items():
                    decisions.lines.clear()
                    compiled = _ember_variant(fn, mode, policy)
                    got = compiled(*inputs)
                    error = (got.float() - expected.float()).norm() / expected.float().norm()
                    ms = bench_ms(lambda c=compiled, inputs=inputs: c(*inputs))
                    row[label] = {"ms": ms, "rel_error": float(error), "decisions": list(decisions.lines),
                                  "ok": bool(error <= (3e-2 if dtype != torch.float32 else 1e-4))}  # fmt: skip
                picked = row["ember max-autotune"]["decisions"]
                row["picked"] = picked
                results.append(row)
                cells = [f"{row[k]['ms']:.3f} ms ({flops / row[k]['ms'] / 1e9:.0f} TFLOP/s)"
                         + ("" if row[k].get("ok", True) else " WRONG")
                         for k in ("eager", *variants)]  # fmt: skip
                print(f"| {name} | {row['dtype']} | " + " | ".join(cells) + " | "
                      + "; ".join(picked) + " |", flush=True)  # fmt: skip
                del inputs, expected
                torch.cuda.empty_cache()
    finally:
        logger.removeHandler(decisions)
        logger.setLevel(saved_level)
        if saved_policy is None:
            os.environ.pop("EMBER_TRITON_MATMUL", None)
        else:
            os.environ["EMBER_TRITON_MATMUL"] = saved_policy
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=1 << 28, help="elements per input")
    parser.add_argument("--row", type=int, default=4096, help="row length of softmax/layernorm")
    parser.add_argument("--only", choices=("all", "bandwidth", "matmul"), default="all")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.only == "matmul":
        matmul = matmul_section()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"matmul": matmul}, f, indent=1)
        return
    import ember

    peak = copy_bandwidth(args.numel)
    print(f"device {torch.cuda.get_device_name()}: copy bandwidth {peak / 1e12:.2f} TB/s")
    results = []
    print("| case | dtype | MB moved | eager | torch.compile | ember | ember % of copy | target |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dtype in (torch.float32, torch.bfloat16):
        for case in cases(args.numel, args.row):
            inputs = case.make_inputs(dtype)
            expected = case.fn(*inputs)
            row = {"case": case.name, "dtype": str(dtype).removeprefix("torch.")}
            for name, make in compilers().items():
                ember.reset()
                torch._dynamo.reset()
                compiled = make(case.fn)
                got = compiled(*inputs)
                tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
                if case.name == "sum":
                    tol = tol * 10  # accumulation order over 2^28 elements
                error = (got.float() - expected.float()).norm() / expected.float().norm()
                ms = bench_ms(lambda compiled=compiled, inputs=inputs: compiled(*inputs))
                gbps = moved_bytes(inputs, expected) / (ms * 1e-3)
                row[name] = {"ms": ms, "bytes_per_s": gbps, "rel_error": float(error),
                             "ok": bool(error <= tol)}  # fmt: skip
            ember_fraction = row["ember"]["bytes_per_s"] / peak
            row["ember_fraction_of_copy"] = ember_fraction
            row["target"] = case.target
            results.append(row)
            cells = [f"{row[n]['bytes_per_s'] / 1e9:.0f} GB/s" + ("" if row[n]["ok"] else " WRONG")
                     for n in ("eager", "torch.compile", "ember")]  # fmt: skip
            print(
                f"| {case.name} | {row['dtype']} | {moved_bytes(inputs, expected) / 1e6:.0f} | "
                + " | ".join(cells)
                + f" | {100 * ember_fraction:.0f}% | {100 * case.target:.0f}% |",
                flush=True,
            )
            del inputs, expected
            torch.cuda.empty_cache()
    met = [r for r in results if r["ember_fraction_of_copy"] >= r["target"] and r["ember"]["ok"]]
    print(f"targets met: {len(met)}/{len(results)}; median ember fraction "
          f"{statistics.median(r['ember_fraction_of_copy'] for r in results):.2f}")  # fmt: skip
    matmul = matmul_section() if args.only == "all" else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bytes_per_s": peak, "results": results, "matmul": matmul}, f,
                      indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
