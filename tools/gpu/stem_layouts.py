"""Suite models' stems (the convolution reading the NCHW images) in both layouts on the GPU:
channels-last with the images copied NHWC first, as a compiled graph would pay it, against
eager's NCHW; peak memory above the start (the copy included) and time. The data behind the
`image_input` rule of ember_inductor_ir/lowering/convolution.py.

    python tools/gpu/stem_layouts.py
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

#: name -> (batch, channels, side, out channels, kernel, stride, padding), dtype
STEMS = {
    "levit_128 fp32": ((1024, 3, 224, 16, 3, 2, 1), torch.float32),
    "ghostnet_100 fp32": ((512, 3, 224, 16, 3, 2, 1), torch.float32),
    "inception_v3 fp32": ((128, 3, 299, 32, 3, 2, 0), torch.float32),
    "mobilenetv2_100 fp32": ((128, 3, 224, 32, 3, 2, 1), torch.float32),
    "rexnet_100 fp32": ((256, 3, 224, 32, 3, 2, 1), torch.float32),
    "resnet50 fp32": ((128, 3, 224, 64, 7, 2, 3), torch.float32),
    "poolformer_m36 fp32": ((64, 3, 224, 96, 7, 4, 2), torch.float32),
    "levit_128 bf16": ((1024, 3, 224, 16, 3, 2, 1), torch.bfloat16),
    "ghostnet_100 bf16": ((512, 3, 224, 16, 3, 2, 1), torch.bfloat16),
    "mobilenetv2_100 bf16": ((128, 3, 224, 32, 3, 2, 1), torch.bfloat16),
    "resnet50 bf16": ((128, 3, 224, 64, 7, 2, 3), torch.bfloat16),
}


def measure(fn: Callable[[], torch.Tensor], repeats: int = 20) -> tuple[float, float]:
    """Peak MB above the start of one call, and ms a call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return peak, start.elapsed_time(end) / repeats


def main() -> None:
    torch.backends.cudnn.allow_tf32 = True  # the suites' fp32 setting
    for name, ((n, c, side, out, k, stride, pad), dtype) in STEMS.items():
        x = torch.randn(n, c, side, side, device="cuda", dtype=dtype)
        w = torch.randn(out, c, k, k, device="cuda", dtype=dtype)
        layouts = {
            "NHWC, images copied": lambda x=x, w=w, s=stride, p=pad: F.conv2d(
                x.contiguous(memory_format=torch.channels_last), w, None, s, p
            ),
            "NCHW": lambda x=x, w=w, s=stride, p=pad: F.conv2d(x, w, None, s, p),
        }
        for label, fn in layouts.items():
            peak, ms = measure(fn)
            print(f"{name:22} {label:20} peak {peak:7.1f} MB  {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
