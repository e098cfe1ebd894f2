"""The slowest GPU kernels of one suite model's compiled step, with the code that made them:
Ember's generated Triton source (the `ember.output_code` log) and torch.compile's (its cache)
go to --out, the top kernels of both (torch.profiler) to stdout.

    python tools/gpu/suite_kernels.py --suite timm --model convnext_tiny --mode train-bf16 --out $OUT

Every kernel of each compiler also goes to OUT/kernels_COMPILER[_VARIANT]_MODEL.tsv (ms a
step, launches, name). `--variant NAME` applies a tools/gpu/bisect_variants.py variant first
(one process per variant: a variant's switches are module state, its compiles cached apart).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

SUITES = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"
sys.path.insert(0, str(SUITES))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="timm")
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="train-bf16")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--compilers", default="torch.compile,ember")
    p.add_argument("--each", action="store_true", help="Ember's kernels one by one, not by family")
    p.add_argument("--variant", help="a bisect_variants.py VARIANTS name, applied before compiling")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tc_cache = tempfile.mkdtemp(prefix="tc_cache_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tc_cache
    ember_cache = os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember_cache_")
    handler = logging.FileHandler(args.out / f"ember_code_{args.model}.txt", mode="w")
    code_log = logging.getLogger("ember.output_code")
    code_log.addHandler(handler)
    code_log.setLevel(logging.INFO)

    if args.variant:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bisect_variants import VARIANTS

        VARIANTS[args.variant]()
    from cases import BUILDERS, to_device
    from kernel_profile import kernel_profile
    from models import entries
    from run import make_step

    case = to_device(BUILDERS[args.suite](entries(args.suite, [args.model])[0], "gpu"), "cuda")
    case.model.train(args.mode.startswith("train"))
    for compiler in args.compilers.split(","):
        step = make_step(case, compiler, args.mode, "cuda")
        for _ in range(3):
            step()
        prof = kernel_profile(step, steps=3, top=args.top, families=not args.each)
        print(f"== {compiler}: GPU {prof['gpu_ms']} ms/step, {prof['kernels']} kernels/step")
        print("   by kind (ms, launches):", prof["by_kind"])
        for name, ms, count in prof["top"]:
            print(f"   {ms:8.3f} ms  x{count:<3} {name}")
        # every kernel, for a per-kernel comparison of two runs (variants, trees) offline
        every = kernel_profile(step, steps=3, top=10**6, families=not args.each)
        suffix = f"_{args.variant}" if args.variant else ""
        with open(args.out / f"kernels_{compiler}{suffix}_{args.model}.tsv", "w") as f:
            f.writelines(f"{ms:.4f}\t{count}\t{name}\n" for name, ms, count in every["top"])
    for name, root in (("tc", tc_cache), ("ember", ember_cache)):
        with open(args.out / f"{name}_code_{args.model}.txt", "a") as f:
            for path in sorted(Path(root).rglob("*.py")):
                f.write(f"#### {path.relative_to(root)}\n{path.read_text()}\n")


if __name__ == "__main__":
    main()
