"""Compile time, cold and with a warm on-disk cache: Ember (inductor) vs torch.compile.

    python benchmarks/compile_time.py [--size tiny|real] [--models mlp,cnn] [--mode infer|train]
        [--compile-workers 1,auto] [--repeat 3]

Each measurement is a fresh process that builds the zoo model, warms the process up on an
unrelated function through the `eager` backend (imports, torch's lazy init), then compiles the model
and times its first call (trace + compile + one run) against a kernel cache directory: "cold"
starts from an empty directory, "warm" is a second process over the directory the cold one filled
(EMBER_CACHE_DIR for Ember, TORCHINDUCTOR_CACHE_DIR for torch.compile). Prints a markdown table
with the warm speedup (cold / warm) of each. `--compile-workers 1,auto` measures Ember once per
size of its C++ build pool (EMBER_COMPILE_WORKERS; `auto` = the cores), a column each: the
serial build against the parallel one. `--repeat R` takes each figure's median of R runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CACHE_ENV = {"ember": "EMBER_CACHE_DIR", "torch.compile": "TORCHINDUCTOR_CACHE_DIR"}


def first_call(compiler: str, name: str, size: str, mode: str, device: str = "cpu") -> float:
    """In this (fresh) process: seconds for the first compiled call of the zoo model."""
    import torch

    import ember_zoo

    case = ember_zoo.build(name, size, seed=0, device=device)
    warm_up_process(compiler)
    if compiler == "ember":
        import ember

        compiled = ember.compile(case.model, backend="inductor")
    else:
        compiled = torch.compile(case.model)
    start = time.perf_counter()
    if mode == "train":
        case.loss(compiled(*case.example_inputs, **case.example_kwargs)).backward()
    else:
        with torch.no_grad():
            compiled(*case.example_inputs, **case.example_kwargs)
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def warm_up_process(compiler: str) -> None:
    """Pay the once-per-process costs (importing the compiler's packages, torch's lazy imports
    behind FakeTensorMode: about 2 s here) on an unrelated function through the *eager*
    backend, so the timed call measures compiling the model, not starting the process."""
    import torch

    def unrelated(x):
        return torch.relu(x) + 1

    if compiler == "ember":
        import ember
        import ember_aot_autograd  # noqa: F401
        import ember_codegen  # noqa: F401
        import ember_inductor_ir  # noqa: F401
        import ember_primops

        ember_primops.decomposition_table()
        ember.compile(unrelated, backend="eager")(torch.randn(3))
    else:
        import torch._inductor.compile_fx

        torch.compile(unrelated, backend="eager")(torch.randn(3))


def measure(
    compiler: str, name: str, args: argparse.Namespace, cache: str, workers: str = "auto"
) -> float:
    env = {**os.environ, CACHE_ENV[compiler]: cache, "HF_HUB_OFFLINE": "1"}
    env.pop("EMBER_COMPILE_WORKERS", None)
    if workers != "auto":
        env["EMBER_COMPILE_WORKERS"] = workers
    command = [sys.executable, __file__, "--child", compiler, "--models", name]
    command += ["--size", args.size, "--mode", args.mode, "--device", args.device]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{compiler} on {name} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--models", default="mlp,transformer_block,cnn,gpt2")
    parser.add_argument("--mode", default="infer", choices=("infer", "train"))
    parser.add_argument("--compilers", default="ember,torch.compile", help="comma-separated")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--compile-workers",
        default="auto",
        help="Ember's C++ build pool sizes to compare, e.g. 1,auto",
    )
    parser.add_argument("--repeat", type=int, default=1, help="median of this many runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        seconds = first_call(args.child, args.models, args.size, args.mode, args.device)
        print(json.dumps({"seconds": seconds}))
        return
    print(f"first call s, {args.size} models, {args.mode}; cold = empty cache dir, warm = reused")
    compilers = args.compilers.split(",")
    unknown = set(compilers) - set(CACHE_ENV)
    if unknown:
        parser.error(f"unknown compilers {sorted(unknown)}; choose from {sorted(CACHE_ENV)}")
    pools = args.compile_workers.split(",")
    columns = [(c, w) for c in compilers for w in (pools if c == "ember" else ["auto"])]

    def label(compiler: str, workers: str) -> str:
        return compiler if len(pools) == 1 or compiler != "ember" else f"{compiler} ({workers})"

    header = "".join(f" | {label(*c)} cold | {label(*c)} warm | cold/warm" for c in columns)
    print(f"| model{header} |")
    print("|---" + "|---:" * 3 * len(columns) + "|")
    for name in args.models.split(","):
        cells = []
        for compiler, workers in columns:
            colds, warms = [], []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory(prefix="ember-compile-time-") as cache:
                    colds.append(measure(compiler, name, args, cache, workers))
                    warms.append(measure(compiler, name, args, cache, workers))
            cold, warm = statistics.median(colds), statistics.median(warms)
            cells += [f"{cold:.2f}", f"{warm:.2f}", f"{cold / warm:.1f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
