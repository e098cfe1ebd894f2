"""The Triton kernels Ember generates for a suite model at its GPU size, made on a machine
without a GPU: the model's step is compiled on the CPU with the Triton target forced and
Triton's interpreter selected, and stopped at its first kernel launch, so only tracing and
code generation are paid for. The kernels' loop shapes, fusion and reduction splits are
those the GPU would get for these sizes (what a session with no device time left can still
compare between two trees). A step of several graphs shows its first graph's kernels only.

    python tools/triton_plan.py --model resnet50 --mode train-bf16 --out /tmp/plan-main
    python tools/triton_plan.py --compare /tmp/plan-old /tmp/plan-main

Writes OUT/kernels.txt (one line per kernel, in the order generated: name, its loop shape
from the header each generated kernel carries, and its launch's grid and block sizes from the
wrapper) and OUT/sources/ (every generated kernel and wrapper file).
Autocast runs on the CPU's policy (convolutions and matmuls in bf16 on both devices).
Needs the suite's libraries (timm, torchvision or transformers) on the path.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = re.compile(r"_k_(\w+)\[(\([^\]]*\))\]\((.*)\)$", re.M)
KERNEL = re.compile(r"^# \S+: (loops [^\n]*)\n@triton\.jit[^\n]*\ndef (\w+)\(", re.M)


class _Planned(Exception):
    """Raised at the first kernel launch: everything before it has been generated."""


def _plan(args: argparse.Namespace) -> None:
    cache = Path(tempfile.mkdtemp(prefix="ember-plan-"))
    os.environ.update(
        TRITON_INTERPRET="1", EMBER_INDUCTOR_TARGET="triton", EMBER_CACHE_DIR=str(cache),
        EMBER_ARTIFACT_CACHE="0", HF_HUB_OFFLINE="1",
    )  # fmt: skip
    from triton.runtime import interpreter  # after TRITON_INTERPRET is set

    def stop(self, *args, **kwargs):
        raise _Planned

    interpreter.InterpretedFunction.run = stop
    sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))
    import torch
    from cases import BUILDERS
    from models import entries
    from run import make_step

    torch.manual_seed(0)
    case = BUILDERS[args.suite](entries(args.suite, [args.model])[0], args.size)
    case.model.train(args.mode.startswith("train"))
    with contextlib.suppress(_Planned):
        make_step(case, "ember", args.mode, "cpu")()
    write_plan(cache, Path(args.out))
    shutil.rmtree(cache, ignore_errors=True)


def write_plan(cache: Path, out: Path) -> None:
    """OUT/kernels.txt and OUT/sources/ from the Triton files of an Ember cache folder."""
    shutil.rmtree(out, ignore_errors=True)
    (out / "sources").mkdir(parents=True)
    files = sorted(cache.rglob("*.py"), key=lambda p: p.stat().st_mtime)
    for path in files:
        shutil.copy(path, out / "sources" / path.name)
    # each graph's kernel module names its kernels as every other graph's does (k0_..., or
    # kernel0 in older trees): a wrapper's launches belong to the module that defines them all
    wrappers = [_launches(f.read_text()) for f in files if f.name.endswith(".wrapper.py")]
    lines = []
    for f in files:
        kernels = list(KERNEL.finditer(f.read_text()))
        names = {m.group(2) for m in kernels}
        launches = max(wrappers, key=lambda w: len(names & w.keys()), default={})
        lines += [
            f"{m.group(2)}: {m.group(1)} | {launches.get(m.group(2), 'not launched')}"
            for m in kernels
        ]
    (out / "kernels.txt").write_text("\n".join(lines) + "\n")
    reductions = sum(" x reduce " in line for line in lines)
    combined = sum(f.read_text().count("\ndef combo_") for f in files)
    print(f"{len(lines)} kernels ({reductions} over reductions), {combined} combined: {out}")


def _launches(wrapper: str) -> dict[str, str]:
    """Kernel name -> its launch in this wrapper: grid and block sizes."""
    found = {}
    for name, grid, call in LAUNCH.findall(wrapper):
        tiles = re.findall(r"(XBLOCK|RBLOCK|num_warps)=(\d+)", call)
        found[name] = f"grid {grid} " + " ".join(f"{k}={v}" for k, v in tiles)
    return found


def _shape(line: str) -> str:
    """A kernel line without its name (but its part: _partial, _finish) and buffer names, so
    that two plans, also of trees that named kernels otherwise, compare by what the kernels
    are."""
    name, rest = line.split(": ", 1)
    part = next((p for p in ("_partial", "_finish", "_template") if name.endswith(p)), "")
    return f"kernel{part}: " + re.sub(r"buf\d+\(", "(", rest)


def _compare(before: Path, after: Path) -> int:
    a = Counter(map(_shape, (before / "kernels.txt").read_text().splitlines()))
    b = Counter(map(_shape, (after / "kernels.txt").read_text().splitlines()))
    print(f"{sum(a.values())} kernels before, {sum(b.values())} after")
    for label, diff in (("only before", a - b), ("only after", b - a)):
        for line, n in sorted(diff.items()):
            print(f"{label} x{n}: {line}")
    return int(a != b)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="timm")
    p.add_argument("--model")
    p.add_argument(
        "--mode", default="train-bf16", choices=("infer-fp32", "infer-bf16", "train-bf16")
    )
    p.add_argument("--size", default="gpu")
    p.add_argument("--out")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args()
    if args.compare:
        return _compare(*args.compare)
    if not (args.model and args.out):
        p.error("--model and --out are needed to make a plan (or --compare BEFORE AFTER)")
    _plan(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
