"""Stage A/B: which stage costs what. Tracer x backend, Ember's and PyTorch's, crossed.

Per zoo model and mode, five columns in one process, timed interleaved (zoo_baseline.py's
harness: same model object, same weights, medians over rounds):

    eager                      the model as is
    ember+ember                ember.compile(model, backend="inductor")
    ember+torch                ember.compile(model, backend=<torch._inductor's compile_fx>)
    dynamo+ember               torch.compile(model, backend=<Ember's inductor backend>)
    dynamo+torch               torch.compile(model)  (default mode)

Both tracers hand graphs to backends by the Dynamo convention `backend(gm, example_inputs)`
(DESIGN.md interface 2), so the pairings are swaps of one stage. The second table reads the
grid along each axis: with the backend fixed, Ember's tracer / Dynamo (the tracer's share of
per-call time: guards, frame hook, graph breaks); with the tracer fixed, Ember's backend /
PyTorch's inductor (aot runtime + generated code). Ratios are of medians; < 1 means Ember's
stage is faster. First call = compile + one run, cold caches (both compilers') unless
--warm-cache.

    python benchmarks/stage_ab.py --size tiny --mode infer
    python benchmarks/stage_ab.py --models gpt2,bert --size real --mode train --json ab.json

PyTorch's inductor under Ember's tracer uses torch._inductor here, in a benchmark; product
code never imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import torch
import zoo_baseline as zb
from zoo_baseline import BASELINE, Compiler, Measurement, Row

TRACERS = ("ember", "dynamo")
BACKENDS = ("ember", "torch")


def _torch_inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """PyTorch's inductor as a Dynamo-convention backend for Ember's tracer (benchmark only)."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def _ember_backend() -> Callable:
    import ember

    return ember.lookup_backend("inductor")


def _reset_both() -> None:
    import torch._dynamo

    import ember

    ember.reset()
    torch._dynamo.reset()


def _pairing(tracer: str, backend: str) -> Callable[[torch.nn.Module], Callable[..., Any]]:
    def compile_model(model: torch.nn.Module) -> Callable[..., Any]:
        import ember

        chosen = _ember_backend() if backend == "ember" else _torch_inductor
        if tracer == "ember":
            return ember.compile(model, backend=chosen)
        if backend == "torch":
            return torch.compile(model)  # PyTorch's default pipeline, as users call it
        return torch.compile(model, backend=chosen)

    return compile_model


def column(tracer: str, backend: str) -> str:
    return f"{tracer}+{backend}"


def compilers() -> list[Compiler]:
    cols = [zb.COMPILERS[BASELINE]]
    for tracer in TRACERS:
        for backend in BACKENDS:
            cols.append(Compiler(column(tracer, backend), _pairing(tracer, backend), _reset_both))
    return cols


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def stage_effects(row: Row) -> dict[str, dict[str, float | None]]:
    """Each axis of the grid with the other stage fixed: Ember's / PyTorch's, per call and
    first call."""
    r = row.results

    def get(tracer: str, backend: str) -> Measurement:
        return r.get(column(tracer, backend), Measurement())

    effects: dict[str, dict[str, float | None]] = {}
    for backend in BACKENDS:
        ours, theirs = get("ember", backend), get("dynamo", backend)
        effects[f"tracer (backend {backend})"] = {
            "per_call": _ratio(ours.median_ms, theirs.median_ms),
            "first_call": _ratio(ours.first_call_s, theirs.first_call_s),
        }
    for tracer in TRACERS:
        ours, theirs = get(tracer, "ember"), get(tracer, "torch")
        effects[f"backend (tracer {tracer})"] = {
            "per_call": _ratio(ours.median_ms, theirs.median_ms),
            "first_call": _ratio(ours.first_call_s, theirs.first_call_s),
        }
    return effects


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cell(m: Measurement) -> str:
    if m.error is not None:
        return "failed: " + m.error.replace("|", "/")
    text = f"{_fmt(m.median_ms, '.3g')} / {_fmt(m.first_call_s, '.1f')}"
    return text + (" MISMATCH" if m.matches is False else "")


def render(rows: list[Row], cols: list[Compiler], env: dict[str, Any]) -> str:
    names = [c.name for c in cols]
    lines = [
        f"## Stage A/B, size `{env['size']}` ({env['date']})",
        "",
        f"torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}; "
        f"{env['cpu']}, {env['cpu_threads']} CPU threads; device {env['device']}; "
        f"load average {env['loadavg']}; median of {env['repeats']} interleaved rounds. "
        "Cells: per-call ms / first call s (compile + one run). Column = tracer+backend.",
        "",
        "| model | mode | " + " | ".join(names) + " |",
        "|---|---|" + "|".join("---" for _ in names) + "|",
    ]
    for row in rows:
        cells = [_cell(row.results.get(n, Measurement())) for n in names]
        lines.append(f"| {row.model} | {row.mode} | " + " | ".join(cells) + " |")
    effect_names = list(stage_effects(rows[0])) if rows else []
    lines += [
        "",
        "Ember's stage / PyTorch's, the other stage fixed (per call, first call):",
        "",
        "| model | mode | " + " | ".join(effect_names) + " |",
        "|---|---|" + "|".join("---" for _ in effect_names) + "|",
    ]
    for row in rows:
        effects = stage_effects(row)
        cells = [
            f"{_fmt(e['per_call'], '.2f')}x, {_fmt(e['first_call'], '.2f')}x"
            for e in effects.values()
        ]
        lines.append(f"| {row.model} | {row.mode} | " + " | ".join(cells) + " |")
    lines += ["", *zb.geomean_lines(rows, names[1:])]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,transformer_block,cnn,gpt2", help="comma-separated")
    p.add_argument("--size", choices=zb.ember_zoo.SIZES, default="tiny")
    p.add_argument("--mode", choices=(*zb.MODES, "both"), default="both")
    p.add_argument("--repeats", type=int, default=10, help="interleaved timing rounds")
    p.add_argument("--device", default="cpu")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls after the first")
    p.add_argument("--min-sample-ms", type=float, default=20.0)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3, help="relative to max |reference|")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warm-cache", action="store_true", help="reuse both on-disk caches")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(zb.ember_zoo.names()))
    if unknown:
        raise SystemExit(f"unknown models {unknown}; valid: {', '.join(zb.ember_zoo.names())}")
    modes = zb.MODES if args.mode == "both" else (args.mode,)
    cache = None
    if not args.warm_cache:  # cold first calls for both compilers
        cache = tempfile.mkdtemp(prefix="stage-ab-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "torch")
        os.environ["EMBER_CACHE_DIR"] = os.path.join(cache, "ember")
    cols = compilers()
    env = {**zb.environment(args), "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    try:
        rows = zb.run_all(models, modes, cols, args)
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    print(render(rows, cols, env))
    if args.json:
        payload = {
            "environment": env,
            "rows": [{**asdict(r), "stage_effects": stage_effects(r)} for r in rows],
        }
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
