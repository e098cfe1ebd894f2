"""Each suite model's 2-d convolutions timed NCHW against NHWC on the GPU (bf16 autocast):
the data for choosing, per convolution or per graph, the layout Ember runs cuDNN in.

    python tools/gpu/conv_layouts.py --suite timm [--models a,b] [--top 8]

Per model: the convolutions its eager forward calls (recorded from ``F.conv2d``, with their
multiplicity), each distinct one timed in both layouts with its input already in that layout;
the stem (a convolution reading the model's input images, which arrive NCHW) also timed
NHWC with the input's transposing copy, as a compiled graph pays it. Prints per model the
sum over its convolutions in each layout and the convolutions where NHWC is slower.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

SUITES = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"
sys.path.insert(0, str(SUITES))


def _record(model: torch.nn.Module, x: torch.Tensor) -> collections.Counter:
    """The forward's conv2d calls: (input shape, weight shape, stride, padding, dilation,
    groups, reads the images) -> how many times."""
    calls: collections.Counter = collections.Counter()
    original = F.conv2d

    def recording(inp, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        key = (tuple(inp.shape), tuple(weight.shape), _pair(stride), _pad(padding),
               _pair(dilation), groups, bias is not None, inp.data_ptr() == x.data_ptr())  # fmt: skip
        calls[key] += 1
        return original(inp, weight, bias, stride, padding, dilation, groups)

    F.conv2d = recording
    try:
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            model(x)
    finally:
        F.conv2d = original
    return calls


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _pad(v):
    return v if isinstance(v, str) else _pair(v)


def _time_ms(fn, iters: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def _time_conv(key) -> tuple[float, float, float]:
    """(NCHW ms, NHWC ms, NHWC ms with the input's copy from NCHW)."""
    in_shape, w_shape, stride, padding, dilation, groups, has_bias, _ = key
    x = torch.randn(in_shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(w_shape, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(w_shape[0], device="cuda", dtype=torch.bfloat16) if has_bias else None
    x_cl = x.contiguous(memory_format=torch.channels_last)
    w_cl = w.contiguous(memory_format=torch.channels_last)
    args = (stride, padding, dilation, groups)
    with torch.no_grad():
        nchw = _time_ms(lambda: F.conv2d(x, w, b, *args))
        nhwc = _time_ms(lambda: F.conv2d(x_cl, w_cl, b, *args))
        copied = _time_ms(
            lambda: F.conv2d(x.contiguous(memory_format=torch.channels_last), w_cl, b, *args)
        )
    return nchw, nhwc, copied


def main() -> None:
    from cases import BUILDERS, to_device
    from models import entries

    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", default="timm")
    parser.add_argument("--models", default="")
    parser.add_argument("--top", type=int, default=6, help="slowest-NHWC convolutions shown")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = False  # eager's default, as the suites run
    names = [n for n in args.models.split(",") if n]
    print("model | convs | NCHW ms | NHWC ms | NHWC/NCHW | stem NCHW | stem NHWC+copy")
    for entry in entries(args.suite, names or None):
        try:
            case = to_device(BUILDERS[args.suite](entry, "gpu"), "cuda")
            x = case.kwargs["x"]
            calls = _record(case.model.eval(), x)
        except Exception as exc:  # a model that fails to build is reported, not fatal
            print(f"{entry.name} | failed: {type(exc).__name__}: {str(exc)[:100]}")
            continue
        del case
        rows = []
        for key, count in calls.items():
            nchw, nhwc, copied = _time_conv(key)
            rows.append((key, count, nchw, nhwc, copied))
        total_nchw = sum(c * a for _, c, a, _, _ in rows)
        total_nhwc = sum(c * (cp if k[-1] else b) for k, c, _, b, cp in rows)
        stem = [(a, cp) for k, _, a, _, cp in rows if k[-1]]
        stem_text = " | ".join(f"{a:.3f} | {cp:.3f}" for a, cp in stem[:1]) or "- | -"
        print(f"{entry.name} | {sum(calls.values())} | {total_nchw:.3f} | {total_nhwc:.3f} | "
              f"{total_nhwc / max(total_nchw, 1e-9):.2f} | {stem_text}")  # fmt: skip
        worse = sorted(rows, key=lambda r: r[1] * (r[3] - r[2]), reverse=True)[: args.top]
        for key, count, nchw, nhwc, copied in worse:
            if nhwc <= nchw * 1.1:
                break
            print(f"    x{count} in={key[0]} w={key[1]} s={key[2]} p={key[3]} g={key[5]} "
                  f"stem={key[-1]}: NCHW {nchw:.3f} NHWC {nhwc:.3f} (+copy {copied:.3f})")  # fmt: skip
        torch.cuda.empty_cache()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
