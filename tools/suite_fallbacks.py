"""Which aten ops of the public suites' models have no decomposition: each model's step (a
training step by default: forward, loss, backward, optimizer) runs eagerly on the CPU under
a non-strict `DecomposeMode`, and the ops that ran as aten kernels are listed per model and
in total. Such an op becomes an aten fallback in Ember's compiled graph: its own launch, no
fusion, and often a layout copy around it (inception_v3's average pools' backward was one,
7.9 ms of a 45 ms step on the H200). No GPU and no compile needed: a few seconds a model.

    PYTHONPATH=$PYTHONPATH:/tmp/suites-extra:$PWD/benchmarks/suites \\
        python tools/suite_fallbacks.py --suite timm --mode train-bf16 [--models a,b]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", required=True, choices=["timm", "huggingface", "torchvision"])
    parser.add_argument("--mode", default="train-bf16", choices=["infer-fp32", "infer-bf16",
                                                                   "train-bf16"])  # fmt: skip
    parser.add_argument("--models", help="comma-separated (default: the whole suite)")
    parser.add_argument("--size", default="cpu-small")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))
    import torch
    from cases import BUILDERS
    from models import entries
    from run import make_step

    from ember_primops.decompose_mode import DecomposeMode

    names = args.models.split(",") if args.models else None
    total: Counter[str] = Counter()
    for entry in entries(args.suite, names):
        start = time.perf_counter()
        try:
            torch.manual_seed(0)
            case = BUILDERS[args.suite](entry, args.size)
            case.model.train(args.mode.startswith("train"))
            step = make_step(case, "eager", args.mode, "cpu")
            mode = DecomposeMode(strict=False)
            with mode:
                step()
        except Exception as exc:  # a model the screen cannot run is reported, not fatal
            print(f"{entry.name}: not run ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
            continue
        # aten's only: the optimizer's profiler markers are no computation
        fallbacks = Counter(
            {op: n for op, n in mode.fallback_counts.items() if op.startswith("aten.")}
        )
        ops = ", ".join(f"{op} x{n}" for op, n in fallbacks.most_common())
        seconds = time.perf_counter() - start
        print(f"{entry.name}: {ops or 'none'} ({seconds:.1f} s)", flush=True)
        total.update({op: 1 for op in fallbacks})
    print("models falling back, by op:", dict(total.most_common()) or "none")


if __name__ == "__main__":
    main()
