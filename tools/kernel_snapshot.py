"""Generated code of the zoo, to check that a restructuring left it byte for byte the same.

    python tools/kernel_snapshot.py snapshot DIR [--models mlp,cnn] [--targets cpp,triton]
    python tools/kernel_snapshot.py compare BEFORE AFTER

`snapshot` compiles every zoo model (tiny) for inference and one training step, once per
target, each in a fresh process with its own empty kernel cache (the Triton target through
Triton's CPU interpreter), then keeps every generated source file (C++ kernels and
wrappers, Triton kernels and wrappers) under DIR/<target>/<model>/, named by the sha256 of
its text. `compare` lists what one snapshot has that the other lacks, per target and model;
it exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE_SUFFIXES = (".cpp", ".py", ".h")

CHILD = """
import sys, torch, ember, ember_zoo
case = ember_zoo.build(sys.argv[1], "tiny", seed=0)
compiled = ember.compile(case.model)
with torch.no_grad():
    case.run(compiled)
case.loss(case.run(compiled)).backward()
"""


def snapshot(out: Path, models: list[str], targets: list[str]) -> None:
    for target in targets:
        for model in models:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "EMBER_CACHE_DIR": cache, "HF_HUB_OFFLINE": "1"}
                if target == "triton":
                    env |= {"TRITON_INTERPRET": "1", "EMBER_INDUCTOR_TARGET": "triton"}
                run = subprocess.run(
                    [sys.executable, "-c", CHILD, model], env=env, capture_output=True, text=True
                )
                if run.returncode:
                    print(f"{target}/{model}: FAILED\n{run.stderr[-2000:]}", file=sys.stderr)
                    continue
                kept = keep_sources(Path(cache), out / target / model)
                print(f"{target}/{model}: {kept} source files")


def keep_sources(cache: Path, dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    kept = 0
    for path in cache.rglob("*"):
        if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
            continue
        text = path.read_bytes()
        digest = hashlib.sha256(text).hexdigest()[:20]
        (dest / f"{digest}{path.suffix}").write_bytes(text)
        kept += 1
    return kept


def compare(before: Path, after: Path) -> int:
    differ = 0
    groups = sorted({p.relative_to(before) for p in before.glob("*/*")} |
                    {p.relative_to(after) for p in after.glob("*/*")})  # fmt: skip
    for group in groups:
        old = {p.name for p in (before / group).glob("*")}
        new = {p.name for p in (after / group).glob("*")}
        if old == new:
            print(f"{group}: {len(old)} files identical")
            continue
        differ += 1
        print(f"{group}: {len(old - new)} only before, {len(new - old)} only after")
        for name in sorted(old - new):
            print(f"  - {before / group / name}")
        for name in sorted(new - old):
            print(f"  + {after / group / name}")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot")
    snap.add_argument("out", type=Path)
    snap.add_argument("--models", default="")
    snap.add_argument("--targets", default="cpp,triton")
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "compare":
        sys.exit(compare(args.before, args.after))
    import ember_zoo

    models = args.models.split(",") if args.models else ember_zoo.names()
    snapshot(args.out, models, args.targets.split(","))


if __name__ == "__main__":
    main()
