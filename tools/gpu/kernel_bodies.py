"""What a kernel's body costs, line by line: a suite model's step is compiled as the suite
runs it (default mode), then each of its largest Triton kernels whose name matches
``--match`` is timed on scratch buffers as generated and with its module's text rewritten
by each variant below (same launch config). A variant changes results (it is a timing
probe, not a fix): it says which part of the body a better code generator should drop.

    python tools/gpu/kernel_bodies.py --suite huggingface --models XGLMForCausalLM --match red_
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_configs import graph_fn, largest_kernels


def _no_round_trip(text: str) -> str:
    """bfloat16 rounding kept in float32 registers (a cast down and back up)."""
    return re.sub(r"\.to\(tl\.(bfloat16|float16)\)\.to\(tl\.float32\)", "", text)


def _int32_index(text: str) -> str:
    """Index values computed in 32 bits rather than 64."""
    text = text.replace(".to(tl.int64)", ".to(tl.int32)")
    return re.sub(r"tl\.full\(\[\], (-?\d+), tl\.int64\)", r"tl.full([], \1, tl.int32)", text)


def _plain_max(text: str) -> str:
    """Triton's own max (no NaN propagation) for elementwise and row maxima."""
    text = re.sub(r"(?<!def )_em_reduce_maximum\((\w+)\)", r"tl.max(\1, 1, keep_dims=True)", text)
    return re.sub(r"(?<!def )_em_maximum\(", "tl.maximum(", text)


def _no_inf_guard(text: str) -> str:
    """A softmax's row maximum used as is (no ``|max| == inf -> 0`` guard)."""
    return re.sub(
        r"(tmp\d+) = \(tl\.abs\((\w+)\) == float\(\"inf\"\)\)\n(\s+)(tmp\d+) = tl\.full\(\[\], 0\.0, "
        r"tl\.float32\)\n\s+(tmp\d+) = tl\.where\(\1, \4, \2\)",
        r"\1 = 0\n\3\4 = 0.0\n\3\5 = \2",
        text,
    )


def _all(text: str) -> str:
    for variant in (_no_round_trip, _int32_index, _plain_max, _no_inf_guard):
        text = variant(text)
    return text


VARIANTS: dict[str, Callable[[str], str]] = {
    "no_round_trip": _no_round_trip,
    "int32_index": _int32_index,
    "plain_max": _plain_max,
    "no_inf_guard": _no_inf_guard,
    "all": _all,
}


def _variant_fn(module_path: str, name: str, variant: str, workdir: Path):
    text = VARIANTS[variant](Path(module_path).read_text())
    path = workdir / f"{Path(module_path).stem}_{variant}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name, None)


def _report(model: str, args: argparse.Namespace, workdir: Path) -> None:
    import torch

    import ember
    from ember_codegen.triton.autotune import launcher, scratch_args_from, time_ms

    largest, jobs, seen = largest_kernels(model, args)
    pattern = re.compile(args.match)
    chosen = [k for k in largest if pattern.search(jobs[k][2].name)][: args.max_kernels]
    device = torch.device(args.device)
    print(f"== {model} ({args.mode}): {len(chosen)} kernels matching {args.match!r}")
    print("   launches  generated_ms  " + "  ".join(VARIANTS) + "  kernel")
    for key in chosen:
        graph, group, kernel, _rnumel, _module = jobs[key]
        kernel_args = scratch_args_from(kernel, group, graph.launch_layouts, device)
        times = []
        for variant in (None, *VARIANTS):
            try:
                fn = (
                    graph_fn(graph, kernel.name)
                    if variant is None
                    else _variant_fn(graph.module_path, kernel.name, variant, workdir)
                )
                times.append(time_ms(launcher(fn, kernel, kernel_args, kernel.config), device))
            except Exception as exc:  # a variant that does not build
                print(f"   {kernel.name} {variant}: {type(exc).__name__}: {str(exc)[:200]}")
                times.append(float("nan"))
        cells = "  ".join(f"{t:8.4f}" for t in times)
        print(f"   {seen[key]:8d}  {cells}  {kernel.name} {kernel.config.describe()}")
        if args.show:
            print(kernel.code)
    ember.reset()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="huggingface")
    p.add_argument("--models", required=True)
    p.add_argument("--mode", default="infer-bf16")
    p.add_argument("--match", default="red_", help="regex over kernel names")
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="gpu")
    p.add_argument("--max-kernels", type=int, default=4)
    p.add_argument("--show", action="store_true", help="print each kernel's source")
    args = p.parse_args()
    os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember-kernel-bodies-"))
    workdir = Path(tempfile.mkdtemp(prefix="ember-variants-"))
    for model in args.models.split(","):
        _report(model, args, workdir)


if __name__ == "__main__":
    main()
