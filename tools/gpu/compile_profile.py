"""Where Ember's cold compile of a suite model's step goes, stage by stage, on the GPU host:

    python tools/gpu/compile_profile.py --suite huggingface --models LlamaForCausalLM \
        --mode train-bf16 --out $OUT [--variants base,workers8] [--cprofile]

Each (model, variant) runs in a fresh process with an empty Ember cache and a compile trace
(EMBER_TRACE_DIR). Prints, and appends to OUT/compile_profile.jsonl, the first call's wall
time, each stage's time summed over the step's graphs (exclusive of nested stages, from the
trace's `stage` records), and the Triton builds: the `triton_build` stage's wall time beside
the sum of the kernel builds' spans on the worker threads (their ratio is the parallelism
the build got). `--cprofile` also writes the first call's 40 heaviest functions (own time).
A variant is a name in VARIANTS: environment settings for its process.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import json
import logging
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

VARIANTS: dict[str, dict[str, str]] = {
    "base": {},
    "workers8": {"EMBER_COMPILE_WORKERS": "8"},  # 8 build worker processes
    "workers4": {"EMBER_COMPILE_WORKERS": "4"},
    "noprebuild": {"EMBER_TRITON_BUILD_PROCESSES": "0"},  # every build in-process
}


def _stage_totals(trace_dir: Path) -> tuple[dict[str, float], float, float]:
    """Stage seconds by name; the builds' summed seconds; the triton_build stages' wall."""
    stages: dict[str, float] = collections.Counter()
    builds = build_wall = 0.0
    for path in trace_dir.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "stage":
                stages[record["name"]] += record["seconds"]
            elif record.get("event") == "span" and record.get("thread") != "MainThread":
                builds += record["end"] - record["start"]
            elif record.get("event") == "span" and record.get("name") == "triton_build":
                build_wall += record["end"] - record["start"]
    return dict(stages), builds, build_wall


class _PrebuildLines(logging.Handler):
    """The perf log's `triton prebuild` lines (kernels built in worker processes, per graph)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("triton prebuild"):
            self.lines.append(message[:300])


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))
    import torch
    from cases import BUILDERS, to_device
    from models import entries
    from run import make_step

    torch.manual_seed(0)
    case = to_device(BUILDERS[args.suite](entries(args.suite, [args.model])[0], "gpu"), "cuda")
    case.model.train(args.mode.startswith("train"))
    step = make_step(case, "ember", args.mode, "cuda")
    prebuilt = _PrebuildLines()
    logging.getLogger("ember.perf").addHandler(prebuilt)
    logging.getLogger("ember.perf").setLevel(logging.INFO)
    profiler = cProfile.Profile() if args.cprofile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    step()
    torch.cuda.synchronize()
    if profiler:
        profiler.disable()
    first_call = time.perf_counter() - start
    start = time.perf_counter()
    step()  # a step whose recompile (if any) is part of a cold start
    torch.cuda.synchronize()
    second_call = time.perf_counter() - start
    stages, builds, build_wall = _stage_totals(Path(os.environ["EMBER_TRACE_DIR"]))
    record = {
        "model": args.model, "mode": args.mode, "variant": args.variant,
        "first_call_s": round(first_call, 2), "second_call_s": round(second_call, 2),
        "stages_s": {k: round(v, 2) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])},
        "build_spans_s": round(builds, 2), "triton_build_wall_s": round(build_wall, 2),
        "workers": os.environ.get("EMBER_COMPILE_WORKERS", "default"),
        "prebuild": prebuilt.lines,
    }  # fmt: skip
    print(json.dumps(record), flush=True)
    with open(Path(args.out) / "compile_profile.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(40)
        name = f"cprofile-{args.model}-{args.variant}.txt"
        (Path(args.out) / name).write_text(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", required=True)
    parser.add_argument("--models", required=True, help="comma list")
    parser.add_argument("--mode", default="train-bf16")
    parser.add_argument("--variants", default="base")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--model", help=argparse.SUPPRESS)  # set in the child
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model:
        child(args)
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for model in args.models.split(","):
        for variant in args.variants.split(","):
            with tempfile.TemporaryDirectory() as scratch:
                env = {
                    **os.environ, **VARIANTS[variant],
                    "EMBER_CACHE_DIR": f"{scratch}/cache", "EMBER_TRACE_DIR": f"{scratch}/trace",
                    "EMBER_ARTIFACT_CACHE": "0",
                }  # fmt: skip
                command = [sys.executable, __file__, *sys.argv[1:], "--model", model,
                           "--variant", variant]  # fmt: skip
                subprocess.run(command, env=env, check=False)


if __name__ == "__main__":
    main()
