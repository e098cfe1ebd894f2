"""Where a compiled step spends its GPU time: kernels per step by kind, and the top kernels
(torch.profiler over a few steady steps). `run.py --profile` adds this to each record, so
that a slow row comes with its cause from the same compiled code that was timed."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

KERNEL_KINDS = (  # the first match names the kind of a GPU kernel
    ("triton", re.compile(r"^triton|^ember|^k\d|^kernel\d|^combo_|_kernel$")),
    ("gemm", re.compile(r"gemm|sm90|sm80|cutlass|cublas|nvjet|xmma", re.I)),
    ("conv", re.compile(r"conv|cudnn|implicit|winograd|dgrad|wgrad", re.I)),
    ("attention", re.compile(r"fmha|flash|attention|efficient", re.I)),
    ("foreach", re.compile(r"foreach|multi_tensor", re.I)),
    ("copy", re.compile(r"copy|Memcpy|memcpy|cat", re.I)),
    ("fill", re.compile(r"fill|Memset|zero", re.I)),
    ("reduce", re.compile(r"reduce|norm|softmax", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized", re.I)),
)


def kernel_kind(name: str) -> str:
    for kind, pattern in KERNEL_KINDS:
        if pattern.search(name):
            return kind
    return "other"


def kernel_profile(
    step: Callable[[], Any], steps: int = 3, top: int = 10, families: bool = True
) -> dict[str, Any]:
    """GPU time (ms) and kernel launches per step, by kind, and the `top` kernels (Ember's
    numbered kernels ranked by family, or each on its own with ``families=False``)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for event in events:
        entry = by_kind[kernel_kind(event.key)]
        entry[0] += event.self_device_time_total / steps / 1e3
        entry[1] += event.count / steps
    ranked_by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for event in events:
        entry = ranked_by[(kernel_family(event.key) if families else event.key)[:90]]
        entry[0] += event.self_device_time_total / steps / 1e3
        entry[1] += event.count / steps
    ranked = sorted(ranked_by.items(), key=lambda item: -item[1][0])
    return {
        "gpu_ms": round(sum(ms for ms, _ in by_kind.values()), 3),
        "kernels": round(sum(n for _, n in by_kind.values())),
        "by_kind": {k: [round(ms, 3), round(n)] for k, (ms, n) in sorted(by_kind.items())},
        "top": [[name, round(ms, 3), round(n)] for name, (ms, n) in ranked[:top]],
    }


def kernel_family(name: str) -> str:
    """Ember's kernels are numbered per graph (`k53_poi_add_mul_sub`): one family per name
    without its number, so that the 30 copies of one block's kernel rank as one."""
    return re.sub(r"^k\d+_", "k*_", name)
