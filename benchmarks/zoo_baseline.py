"""Zoo benchmark: eager PyTorch vs ``torch.compile`` vs Ember (``--compilers ...,ember``).

Every compiler runs in this one process on the same model object (same weights), and the
timed iterations are interleaved (eager, compiled, eager, compiled, ...; the order rotates
each round) so that drift in machine load hits every column alike. Per (model, mode) it
reports the median ms per iteration of each compiler, the median of the per-round ratios
eager/compiler (speedup), the first-call time (compilation plus one run) and the largest
difference from eager.

    python benchmarks/zoo_baseline.py --size tiny
    python benchmarks/zoo_baseline.py --size real --models mlp,cnn --mode infer --json out.json

More columns: ``register_compiler("ember", ember.compile)`` from a wrapper script, or
``--compilers eager,torch.compile,ember=ember:compile`` (``name=module:attr``, where attr
takes an ``nn.Module`` and returns a callable with the same signature).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Zoo models are built from configs; never reach for the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch

try:
    import ember_zoo
except ImportError:  # running from a checkout without `pip install ./benchmarks/zoo`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo", "src"))
    import ember_zoo

BASELINE = "eager"
MODES = ("infer", "train")


@dataclass(frozen=True)
class Compiler:
    """A benchmark column: turns the zoo model into a callable with the same signature."""

    name: str
    compile: Callable[[torch.nn.Module], Callable[..., Any]]
    # Drops caches between models, so each model's first call measures a cold compile.
    reset: Callable[[], None] | None = None


COMPILERS: dict[str, Compiler] = {}


def register_compiler(
    name: str,
    compile: Callable[[torch.nn.Module], Callable[..., Any]],
    reset: Callable[[], None] | None = None,
) -> None:
    """Add (or replace) a column that ``--compilers`` can name."""
    COMPILERS[name] = Compiler(name, compile, reset)


def _reset_dynamo() -> None:
    import torch._dynamo  # the oracle may use torch internals; Ember's packages may not

    torch._dynamo.reset()


register_compiler(BASELINE, lambda model: model)
register_compiler("torch.compile", torch.compile, _reset_dynamo)


def _ember_inductor(model: torch.nn.Module) -> Callable[..., Any]:
    import ember  # imported on use: the baseline runs without Ember installed

    return ember.compile(model, backend="inductor")


def _reset_ember() -> None:
    import ember

    ember.reset()


def _ember_reduce_overhead(model: torch.nn.Module) -> Callable[..., Any]:
    import ember

    return ember.compile(model, backend="inductor", mode="reduce-overhead")


def _ember_autotune(model: torch.nn.Module) -> Callable[..., Any]:
    import ember

    return ember.compile(model, backend="autotune")


register_compiler("ember", _ember_inductor, _reset_ember)
register_compiler("ember-autotune", _ember_autotune, _reset_ember)
register_compiler("ember-reduce-overhead", _ember_reduce_overhead, _reset_ember)
register_compiler(
    "torch.compile-reduce-overhead",
    lambda model: torch.compile(model, mode="reduce-overhead"),
    _reset_dynamo,
)


def resolve_compiler(spec: str) -> Compiler:
    """A registered name, or ``name=module:attr`` to import a compile function on the fly."""
    if spec in COMPILERS:
        return COMPILERS[spec]
    name, sep, target = spec.partition("=")
    module_name, colon, attr = target.partition(":")
    if not (sep and colon and module_name and attr):
        known = ", ".join(COMPILERS)
        raise SystemExit(f"unknown compiler {spec!r}: use one of {known} or name=module:attr")
    fn = getattr(importlib.import_module(module_name), attr)
    return Compiler(name, fn, getattr(fn, "reset", None))


@dataclass
class Measurement:
    """One compiler on one (model, mode)."""

    median_ms: float | None = None
    speedup: float | None = None  # median over rounds of eager_time / this_time
    first_call_s: float | None = None
    max_abs_diff: float | None = None
    matches: bool | None = None
    error: str | None = None
    samples_ms: list[float] = field(default_factory=list)


@dataclass
class Row:
    model: str
    mode: str
    inner: int = 1  # iterations per timed sample
    results: dict[str, Measurement] = field(default_factory=dict)


Step = Callable[[], list[torch.Tensor]]


def make_step(case: ember_zoo.ZooCase, fn: Callable[..., Any], mode: str) -> Step:
    """One benchmark iteration through ``fn``; returns the tensors to compare with eager."""
    params = [p for p in case.model.parameters() if p.requires_grad]

    def infer() -> list[torch.Tensor]:
        with torch.no_grad():
            return ember_zoo.output_tensors(case.run(fn))

    def train() -> list[torch.Tensor]:
        case.model.zero_grad(set_to_none=True)
        loss = ember_zoo.training_loss(case, fn)
        loss.backward()
        return [loss.detach()] + [p.grad for p in params if p.grad is not None]

    return infer if mode == "infer" else train


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Step, n: int, device: torch.device) -> float:
    """Seconds per iteration over ``n`` back-to-back iterations."""
    _sync(device)
    start = time.perf_counter()
    for _ in range(n):
        step()
    _sync(device)
    return (time.perf_counter() - start) / n


def compare(
    got: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], rtol: float, atol: float
) -> tuple[float, bool]:
    """Max abs difference, and whether every tensor passes a scale-aware allclose.

    ``atol`` is relative to the largest magnitude in each reference tensor, so small
    gradients and large logits are judged alike, but floored at 1/1000 of the largest
    magnitude over all tensors: a gradient that is zero up to rounding (an attention key
    bias, say) is rounding noise on both sides and must not count as a mismatch.
    """
    if len(got) != len(ref) or any(g.shape != r.shape for g, r in zip(got, ref, strict=True)):
        return math.inf, False
    scales = [
        r.detach().abs().max().item() if r.is_floating_point() and r.numel() else 0.0 for r in ref
    ]
    floor = 1e-3 * max(scales, default=0.0)
    worst, ok = 0.0, True
    for g, r, scale in zip(got, ref, scales, strict=True):
        if r.numel() == 0:
            continue
        if not r.is_floating_point():
            same = torch.equal(g, r)
            worst, ok = max(worst, 0.0 if same else math.inf), ok and same
            continue
        g64, r64 = g.detach().double(), r.detach().double()
        worst = max(worst, (g64 - r64).abs().max().item())
        tol = atol * max(scale, floor, 1e-30)
        ok = ok and torch.allclose(g64, r64, rtol=rtol, atol=tol)
    return worst, ok


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text[:120]


def bench_mode(
    case: ember_zoo.ZooCase, mode: str, compilers: list[Compiler], args: argparse.Namespace
) -> Row:
    """Warm up every compiler, check it against eager, then time them interleaved."""
    device = torch.device(args.device)
    case.model.train(mode == "train")
    row = Row(case.name, mode)
    steps: dict[str, Step] = {}
    reference: list[torch.Tensor] = []
    for compiler in compilers:
        m = row.results[compiler.name] = Measurement()
        try:
            step = make_step(case, compiler.compile(case.model), mode)
            _sync(device)
            start = time.perf_counter()
            out = [t.detach().clone() for t in step()]
            _sync(device)
            m.first_call_s = time.perf_counter() - start
            if compiler.name == BASELINE:
                reference = out
            m.max_abs_diff, m.matches = compare(out, reference, args.rtol, args.atol)
            for _ in range(args.warmup):
                step()
            steps[compiler.name] = step
        except Exception as exc:  # a failing compiler is a result, not the end of the run
            m.error = _reason(exc)
            log(f"  {compiler.name} {mode}: failed: {m.error}")
    if BASELINE not in steps:
        return row

    # Enough iterations per sample that timer resolution and call jitter don't dominate.
    per_iter = timed(steps[BASELINE], 1, device)
    row.inner = max(1, math.ceil(args.min_sample_ms / 1e3 / max(per_iter, 1e-9)))
    for round_ in range(args.repeats):
        # The order rotates each round: a column that always ran right after another (eager's
        # allocations, the same kind of compiled code) was measured up to 7% faster or slower
        # than the same code in another column.
        names = list(steps)
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            try:
                row.results[name].samples_ms.append(1e3 * timed(steps[name], row.inner, device))
            except Exception as exc:
                row.results[name].error = _reason(exc)
                del steps[name]
    base = row.results[BASELINE].samples_ms
    for m in row.results.values():
        if m.error is None and m.samples_ms:
            m.median_ms = statistics.median(m.samples_ms)
            if len(m.samples_ms) == len(base):  # else the baseline itself failed midway
                m.speedup = statistics.median(
                    b / s for b, s in zip(base, m.samples_ms, strict=True)
                )
    return row


def prime(compilers: list[Compiler], device: str) -> None:
    """Pay one-off start-up costs (imports, worker pools) before the first real model.

    Without this the first model's first-call time would include them and not be
    comparable with the others'.
    """
    model = torch.nn.Linear(4, 4, device=device)
    x = torch.randn(2, 4, device=device)
    for compiler in compilers:
        try:
            fn = compiler.compile(model)
            with torch.no_grad():
                fn(x)
            fn(x).sum().backward()
        except Exception as exc:
            log(f"  {compiler.name}: warm-up failed: {_reason(exc)}")
        if compiler.reset is not None:
            compiler.reset()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def environment(args: argparse.Namespace) -> dict[str, Any]:
    try:
        import transformers

        hf_version = transformers.__version__
    except ImportError:
        hf_version = "not installed"
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "transformers": hf_version,
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "device": args.device,
        "size": args.size,
        "repeats": args.repeats,
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(rows: list[Row], compilers: list[Compiler], env: dict[str, Any]) -> str:
    """Markdown: a header with the environment, then one table row per (model, mode)."""
    others = [c.name for c in compilers if c.name != BASELINE]
    header = ["model", "mode", f"{BASELINE} ms"]
    for name in others:
        header += [f"{name} ms", f"{name} speedup", f"{name} first call s", f"{name} max abs diff"]
    lines = [
        f"## Zoo baseline, size `{env['size']}` ({env['date']})",
        "",
        f"torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}; "
        f"{env['cpu']}, {env['cpu_threads']} CPU threads; device {env['device']}; "
        f"median of {env['repeats']} interleaved rounds; speedup = median(eager / column).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for row in rows:
        base = row.results.get(BASELINE, Measurement())
        cells = [row.model, row.mode, _cell_ms(base)]
        for name in others:
            m = row.results.get(name, Measurement())
            if m.error is not None:
                cells += [_cell_ms(m), "-", "-", "-"]
                continue
            diff = _fmt(m.max_abs_diff, ".1e")
            if m.matches is False:
                diff += " MISMATCH"
            speedup = "-" if m.speedup is None else f"{m.speedup:.2f}x"
            cells += [_cell_ms(m), speedup, _fmt(m.first_call_s, ".1f"), diff]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *geomean_lines(rows, others)]
    return "\n".join(lines)


def geomean_lines(rows: list[Row], names: list[str]) -> list[str]:
    """Geometric mean of each column's speedups per mode, over the models where it ran."""
    out = []
    for mode in dict.fromkeys(r.mode for r in rows):
        parts = []
        for name in names:
            speedups = [
                r.results[name].speedup
                for r in rows
                if r.mode == mode and name in r.results and r.results[name].speedup
            ]
            if speedups:
                geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
                parts.append(f"{name} {geomean:.2f}x ({len(speedups)} models)")
        if parts:
            out.append(f"Geomean speedup over {BASELINE}, {mode}: " + ", ".join(parts) + ".")
    return out


def _cell_ms(m: Measurement) -> str:
    if m.error is not None:
        return "failed: " + m.error.replace("|", "/")
    return _fmt(m.median_ms, ".3g")


def run_all(
    models: list[str], modes: Sequence[str], compilers: list[Compiler], args: argparse.Namespace
) -> list[Row]:
    prime(compilers, args.device)
    rows: list[Row] = []
    for name in models:
        log(f"{name} ({args.size})")
        case = ember_zoo.build(name, args.size, seed=args.seed, device=args.device)
        for mode in modes:
            row = bench_mode(case, mode, compilers, args)
            rows.append(row)
            summary = ", ".join(f"{n} {_cell_ms(m)} ms" for n, m in row.results.items())
            log(f"  {mode}: {summary}")
        for compiler in compilers:
            if compiler.reset is not None:
                compiler.reset()
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=ember_zoo.SIZES, default="real")
    p.add_argument("--models", default=",".join(ember_zoo.names()), help="comma-separated")
    p.add_argument("--mode", choices=(*MODES, "both"), default="both")
    p.add_argument("--compilers", default=f"{BASELINE},torch.compile", help="comma-separated")
    p.add_argument("--repeats", type=int, default=10, help="interleaved timing rounds")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls after the first")
    p.add_argument(
        "--min-sample-ms", type=float, default=20.0, help="iterations per sample reach this"
    )
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3, help="relative to max |reference|")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--warm-cache",
        action="store_true",
        help="reuse the on-disk inductor cache (default: a fresh one, so first calls are cold)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(ember_zoo.names()))
    if unknown:
        raise SystemExit(f"unknown models {unknown}; valid: {', '.join(ember_zoo.names())}")
    specs = [s for s in args.compilers.split(",") if s]
    compilers = [resolve_compiler(s) for s in specs if s != BASELINE]
    compilers.insert(0, COMPILERS[BASELINE])  # always the first column: the reference
    modes = MODES if args.mode == "both" else (args.mode,)

    env = environment(args)
    cache = None
    if not args.warm_cache:
        # Inductor keeps compiled graphs on disk across processes; a private cache makes
        # "first call" mean a cold compile on every run, not just the first one.
        cache = tempfile.mkdtemp(prefix="zoo-baseline-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    try:
        rows = run_all(models, modes, compilers, args)
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    table = render(rows, compilers, env)
    print(table)
    if args.json:
        payload = {"environment": env, "rows": [asdict(r) for r in rows]}
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
