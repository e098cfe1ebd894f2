"""What is live at the peak of one steady call of a suite model, under each compiler, on the
GPU: the CUDA allocator's history of the call replayed in order, and the blocks held at its
highest point grouped by where they were allocated (the innermost frame outside torch, with
its source line: a generated wrapper's line names the buffer or library call).

    python tools/gpu/memory_peak.py --suite timm --models poolformer_m36,levit_128 \
        --mode infer-fp32 [--compilers torch.compile,ember] [--top 12]

Peak figures are above what was allocated before the call, as the suite runner's `peak_mb`.
Answers where a peak above the plan's `Schedule.peak_bytes` comes from (a library's own
result or workspace, a copy the wrapper makes, an input cast).
"""

from __future__ import annotations

import argparse
import collections
import linecache
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "suites"))

from cases import BUILDERS, to_device
from models import entries
from run import make_step, reset_all

_TORCH_DIR = str(Path(torch.__file__).parent)


def live_at_peak(trace: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """Replays allocator events (alloc, then free_requested or free_completed, whichever
    comes first) and returns the peak bytes above the start and the blocks live then."""
    live: dict[int, dict[str, Any]] = {}
    total = peak = 0
    at_peak: list[dict[str, Any]] = []
    for event in trace:
        action, addr = event.get("action"), event.get("addr")
        if action == "alloc":
            live[addr] = event
            total += event["size"]
            if total > peak:
                peak, at_peak = total, list(live.values())
        elif action in ("free_requested", "free_completed") and addr in live:
            total -= live.pop(addr)["size"]
    return peak, at_peak


def site(frames: list[dict[str, Any]]) -> str:
    """The innermost frame outside torch (a wrapper line or a model line) and the innermost
    frame of all (the op that allocated)."""
    inner = frames[0] if frames else {}
    for frame in frames:
        name = frame.get("filename", "")
        if not name.startswith(_TORCH_DIR) and "/torch/" not in name:
            text = linecache.getline(name, frame.get("line", 0)).strip()
            where = f"{Path(name).name}:{frame.get('line')} {frame.get('name')}"
            return f"{where} | {text[:90]} | via {inner.get('name', '?')}"
    return f"{inner.get('filename', '?')}:{inner.get('line')} {inner.get('name')}"


def report(name: str, step: Any, top: int) -> None:
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=1_000_000)  # fmt: skip
    step()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    trace = snapshot["device_traces"][torch.cuda.current_device()]
    peak, blocks = live_at_peak(trace)
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for block in blocks:
        groups[site(block.get("frames", []))].append(block["size"])
    print(f"  {name}: peak {peak / 2**20:.1f} MB above the call's start, "
          f"{len(blocks)} blocks live at it")  # fmt: skip
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    for where, sizes in ranked[:top]:
        print(f"    {sum(sizes) / 2**20:9.1f} MB  x{len(sizes):<3} {where}")
    rest = sum(sum(s) for _, s in ranked[top:])
    if rest:
        print(f"    {rest / 2**20:9.1f} MB  in {len(ranked) - top} more sites")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--mode", default="infer-fp32")
    parser.add_argument("--size", default="gpu")
    parser.add_argument("--compilers", default="torch.compile,ember")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    for model in args.models.split(","):
        case = to_device(BUILDERS[args.suite](entries(args.suite, [model])[0], args.size), "cuda")
        case.model.train(args.mode.startswith("train"))
        print(f"{args.suite} {model} {args.mode} batch {case.batch}")
        reset_all()
        for compiler in args.compilers.split(","):
            report(compiler, make_step(case, compiler, args.mode, "cuda"), args.top)
        del case
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
