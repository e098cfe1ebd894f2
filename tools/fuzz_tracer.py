"""Tracer fuzzer: generated programs run eager and compiled, compared round after round.

Each program (`fuzz_programs.generate`) is written to a module file and loaded once per
runner (eager, then one per backend), so every run has its own globals, closure cells and
code objects. A program runs for several rounds; before each round the runner sets the
globals, closure cells and module attributes the program reads and builds fresh, identical
arguments for every runner. Rounds: the base values; new tensor values (a cache hit); changed
Python values; changed shapes, dtypes, types and list lengths; the base values again.

After each round it compares the return values (tensors: dtype, shape, requires_grad,
allclose at tight tolerances; Python values by == and type), exceptions (the compiled run
must raise the type eager raised), the arguments as mutated, the globals, closure cells,
module attributes and the printed output. A mismatch, or an exception where eager ran, is a
failure: the program is shrunk (statements dropped while the failure persists) and written
to OUT/fail_<seed>_<index>_<backend>.py; `--repro FILE` runs one again.

    python tools/fuzz_tracer.py --count 1000 --seed 0 --backends eager,aot_eager --jobs 2
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import importlib.util
import io
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch

import fuzz_programs

RTOL, ATOL = 1e-4, 1e-5
ROUNDS = ("base", "values", "python", "structure", "base_again")

# generator features off by default while a tracer bug they found is open (--exclude adds
# more, --include brings one back); dtype_cast's bug is fixed, so none is off now
KNOWN_BROKEN: frozenset[str] = frozenset()
# compare globals/arguments after a call where eager raised (off: see compare())
STATE_AFTER_ERROR = os.environ.get("EMBER_FUZZ_STATE_AFTER_ERROR") == "1"
# tensors of one round share a dtype unless this is on (see round_configs)
MIXED_DTYPES = os.environ.get("EMBER_FUZZ_MIXED_DTYPES") == "1"
# ember.compile's dynamic= (None: automatic, as users get it); set by --dynamic
DYNAMIC: dict[str, bool | None] = {"none": None, "false": False, "true": True}
COMPILE_OPTIONS: dict[str, Any] = {"dynamic": None}
# int64 tensors in the structure round (off: ops eager refuses for ints fail at compile time
# under aot_eager with BackendCompilerFailed instead of eager's error; in the report)
INT_TENSORS = os.environ.get("EMBER_FUZZ_INT_TENSORS") == "1"


# ---------------------------------------------------------------------------------------
# round configurations: what the runner sets before a call
@dataclass
class RoundConfig:
    dims: tuple[int, int]
    dtypes: dict[str, torch.dtype]
    n: Any
    lst: list
    d_keys: tuple[str, ...]
    g_int: Any
    g_float: float
    g_flag: bool
    g_list: list
    g_mode: str
    cap_i: Any
    cap_f: float
    cap_flag: bool
    mod_scale: float
    mod_flag: bool
    values_seed: int


TENSOR_NAMES = ("x", "y", "w", "d_p", "d_q", "G_T", "cap_t")


def round_configs(seed: str) -> list[RoundConfig]:
    rng = random.Random(f"rounds:{seed}")

    def python_values(cfg: dict) -> None:
        cfg.update(
            n=rng.randint(0, 4),
            g_int=rng.randint(0, 4),
            g_float=rng.choice([0.5, 1.25, -2.0]),
            g_flag=rng.random() < 0.5,
            g_mode=rng.choice("abc"),
            cap_i=rng.randint(0, 5),
            cap_f=rng.choice([0.5, 2.0, -1.5]),
            cap_flag=rng.random() < 0.5,
            mod_scale=rng.choice([1.0, -0.5, 3.0]),
            mod_flag=rng.random() < 0.8,
        )

    base = dict(
        dims=(rng.randint(2, 4), rng.randint(2, 4)),
        dtypes={name: torch.float32 for name in TENSOR_NAMES},
        lst=[rng.randint(0, 3) for _ in range(rng.randint(1, 3))],
        d_keys=("p", "q"),
        g_list=[1, 2, 3],
    )
    python_values(base)
    configs = [RoundConfig(**base, values_seed=rng.randrange(1 << 30))]
    configs.append(RoundConfig(**base, values_seed=rng.randrange(1 << 30)))
    changed = dict(base)
    python_values(changed)
    configs.append(RoundConfig(**changed, values_seed=rng.randrange(1 << 30)))
    structure = dict(changed)
    structure["dims"] = (rng.randint(1, 5), rng.randint(1, 5))
    dtypes = [torch.float32, torch.float32, torch.float64]
    if INT_TENSORS:
        dtypes.append(torch.int64)
    one = rng.choice(dtypes)
    structure["dtypes"] = {
        name: rng.choice(dtypes) if MIXED_DTYPES else one for name in TENSOR_NAMES
    }
    structure["lst"] = [rng.randint(0, 3) for _ in range(rng.choice([0, 1, 4]))]
    structure["d_keys"] = rng.choice([("p",), ("p", "q", "r"), ("q", "p")])
    structure["g_list"] = rng.choice([[], [5], [1, 2, 3, 4]])
    structure["n"] = rng.choice([2.0, 3, True])
    structure["g_int"] = rng.choice([1.5, 2, -1])
    structure["cap_i"] = rng.choice([2.5, 3])
    configs.append(RoundConfig(**structure, values_seed=rng.randrange(1 << 30)))
    configs.append(RoundConfig(**base, values_seed=rng.randrange(1 << 30)))
    return configs


def make_tensor(gen: torch.Generator, kind: tuple[str, ...], cfg: RoundConfig, dtype):
    sizes = {"A": cfg.dims[0], "B": cfg.dims[1]}
    shape = [sizes[label] for label in kind]
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    return torch.randint(-3, 4, shape, generator=gen, dtype=dtype)


def build_state(cfg: RoundConfig) -> dict[str, Any]:
    """Fresh arguments and values for one call (call again for an identical copy)."""
    gen = torch.Generator().manual_seed(cfg.values_seed)
    kinds = {**fuzz_programs.ARG_KINDS, **fuzz_programs.CAPTURED_KINDS}
    t = {
        name: make_tensor(
            gen, kinds.get(name, fuzz_programs.DICT_VALUE_KIND), cfg, cfg.dtypes[name]
        )
        for name in TENSOR_NAMES
    }
    d = {key: t.get(f"d_{key}", t["d_p"] * 2) for key in cfg.d_keys}
    args = (t["x"], t["y"], t["w"], cfg.n, list(cfg.lst), d)
    return {"args": args, "G_T": t["G_T"], "cap_t": t["cap_t"]}


def apply_state(module, cfg: RoundConfig, state: dict[str, Any]) -> None:
    module.G_INT = cfg.g_int
    module.G_FLOAT = cfg.g_float
    module.G_FLAG = cfg.g_flag
    module.G_LIST = list(cfg.g_list)
    module.G_MODE = cfg.g_mode
    module.G_T = state["G_T"]
    module.MOD0.scale = cfg.mod_scale
    module.MOD0.flag = cfg.mod_flag
    # what the program writes starts afresh each round: a round where eager raised may
    # leave it differently (see compare) and must not leak into the next one
    module.MOD0.count = 0
    module.G_COUNT = 0
    module.G_LAST = None
    module.OUT.seek(0)
    module.OUT.truncate()
    cells = {"cap_i": cfg.cap_i, "cap_f": cfg.cap_f, "cap_flag": cfg.cap_flag}
    cells["cap_t"] = state["cap_t"]
    fn = module.fn
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        cell.cell_contents = cells[name]


def observed_state(module) -> dict[str, Any]:
    fn = module.fn
    cells = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        with contextlib.suppress(ValueError):  # an empty cell
            cells[name] = cell.cell_contents
    names = fuzz_programs.GLOBALS_SET + fuzz_programs.GLOBALS_WRITTEN
    return {
        "globals": {name: getattr(module, name) for name in names},
        "cells": cells,
        "module": (module.MOD0.scale, module.MOD0.flag, module.MOD0.count),
        "printed": module.OUT.getvalue(),
    }


# ---------------------------------------------------------------------------------------
# comparison
def difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where `b` (compiled) differs from `a` (eager), or None."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{path}: tensor vs {type(b).__name__}"
        for attr in ("dtype", "shape", "requires_grad"):
            if getattr(a, attr) != getattr(b, attr):
                return f"{path}: {attr} {getattr(a, attr)} vs {getattr(b, attr)}"
        if not torch.allclose(a.detach(), b.detach(), rtol=RTOL, atol=ATOL, equal_nan=True):
            diff = (a.detach().double() - b.detach().double()).abs().max()
            return f"{path}: values differ (max abs diff {diff})"
        return None
    if type(a) is not type(b):
        return f"{path}: type {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (found := difference(x, y, f"{path}[{i}]")) is not None:
                return found
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for key in a:
            if (found := difference(a[key], b[key], f"{path}[{key!r}]")) is not None:
                return found
        return None
    if isinstance(a, float):
        if math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL) or (math.isnan(a) and math.isnan(b)):
            return None
        return f"{path}: {a!r} vs {b!r}"
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


class ProgramTimeout(Exception):
    pass


def call(fn, args) -> Outcome:
    try:
        return Outcome(value=fn(*args))
    except ProgramTimeout:
        raise
    except Exception as e:
        return Outcome(error=e)


def compare(eager: Outcome, compiled: Outcome, eager_args, compiled_args, eager_mod, comp_mod):
    """(kind, message) of the first difference, or None."""
    if eager.error is not None:
        if compiled.error is None:
            return "mismatch", f"eager raised {type(eager.error).__name__}, compiled did not"
        if type(compiled.error) is not type(eager.error):
            return "crash", (
                f"eager raised {type(eager.error).__name__}: {eager.error}; compiled raised "
                f"{type(compiled.error).__name__}: {compiled.error}"
            )
        if not STATE_AFTER_ERROR:
            # Python side effects are replayed after a graph, so a graph that raises loses
            # the writes traced before the raising op (a known limit, in the report)
            return None
    elif compiled.error is not None:
        e = compiled.error
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
        return "crash", f"compiled raised where eager ran: {type(e).__name__}: {e}\n{tb}"
    elif (found := difference(eager.value, compiled.value, "return")) is not None:
        return "mismatch", found
    if (found := difference(list(eager_args), list(compiled_args), "args")) is not None:
        return "mismatch", found
    found = difference(observed_state(eager_mod), observed_state(comp_mod), "state")
    if found is not None:
        return "mismatch", found
    return None


# ---------------------------------------------------------------------------------------
# running one program
@contextlib.contextmanager
def time_limit(seconds: float):
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise ProgramTimeout(f"program ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_load_counter = 0


def load_module(path: Path, role: str):
    """A fresh module object (own globals and code objects) from the program's file."""
    global _load_counter
    _load_counter += 1
    spec = importlib.util.spec_from_file_location(f"fuzzprog_{_load_counter}_{role}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Result:
    seed: str
    status: str = "ok"  # ok | fail | timeout | error (the program's module itself)
    backend: str | None = None
    kind: str | None = None  # mismatch | crash
    round: str | None = None
    message: str = ""
    graphs: Counter = field(default_factory=Counter)  # per backend
    breaks: Counter = field(default_factory=Counter)
    eager_raised: int = 0
    repro: str | None = None

    def to_json(self) -> str:
        data = dict(self.__dict__)
        data["graphs"], data["breaks"] = dict(self.graphs), dict(self.breaks)
        return json.dumps(data)


def run_source(
    source: str, seed: str, backends: list[str], workdir: Path, result: Result | None = None
) -> Result:
    """Runs one program's rounds on every backend; stops at the first failure."""
    import ember

    result = result or Result(seed)
    path = workdir / f"prog_{os.getpid()}.py"
    path.write_text(source)
    ember.reset()
    eager_mod = load_module(path, "eager")
    runners = []
    for backend in backends:
        module = load_module(path, backend)
        runners.append(
            (backend, module, ember.compile(module.fn, backend=backend, **COMPILE_OPTIONS))
        )
    try:
        for round_name, cfg in zip(ROUNDS, round_configs(seed), strict=True):
            state = build_state(cfg)
            apply_state(eager_mod, cfg, state)
            eager_args = state["args"]
            eager = call(eager_mod.fn, eager_args)
            result.eager_raised += eager.error is not None
            for backend, module, compiled_fn in runners:
                state = build_state(cfg)
                apply_state(module, cfg, state)
                outcome = call(compiled_fn, state["args"])
                failure = compare(eager, outcome, eager_args, state["args"], eager_mod, module)
                if failure is not None:
                    result.status, result.backend, result.round = "fail", backend, round_name
                    result.kind, result.message = failure
                    return result
    finally:
        for backend, _module, compiled_fn in runners:
            records = compiled_fn._ember_compiler.records
            result.graphs[backend] += sum(len(r.graphs) for r in records)
            result.breaks[backend] += sum(len(r.breaks) for r in records)
        ember.reset()
    return result


def run_program(
    seed: str, backends: list[str], features: frozenset[str], workdir: Path, timeout: float
) -> Result:
    result = Result(seed)
    try:
        program = fuzz_programs.generate(seed, features)
        with time_limit(timeout):
            run_source(program.source(), seed, backends, workdir, result)
    except ProgramTimeout as e:
        result.status, result.message = "timeout", str(e)
    except Exception as e:
        result.status = "error"
        result.message = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-2000:]
    return result


# ---------------------------------------------------------------------------------------
# minimizing a failure
def failure_signature(result: Result) -> tuple | None:
    if result.status != "fail":
        return None
    if result.kind == "crash":  # the exception type the compiled run raised
        return result.kind, result.backend, result.message.split(":")[0][:80]
    return result.kind, result.backend


def node_paths(nodes: list, prefix: tuple = ()) -> list[tuple]:
    paths = []
    for i, node in enumerate(nodes):
        paths.append((*prefix, i))
        for c, (_header, body) in enumerate(node.clauses or ()):
            paths += node_paths(body, (*prefix, i, c))
    return paths


def without(nodes: list, path: tuple) -> list:
    """A copy of `nodes` with the node at `path` removed."""
    nodes = copy.deepcopy(nodes)
    container = nodes
    rest = list(path)
    while len(rest) > 1:
        node = container[rest.pop(0)]
        container = node.clauses[rest.pop(0)][1]
    del container[rest[0]]
    return nodes


def minimize(program, result: Result, workdir: Path, budget_s: float = 120.0):
    """Drops statements and returned items while the same failure persists."""
    target = failure_signature(result)
    deadline = time.monotonic() + budget_s

    def still_fails(candidate) -> bool:
        try:
            with time_limit(30):
                got = run_source(candidate.source(), result.seed, [result.backend], workdir)
        except ProgramTimeout:
            return False
        return failure_signature(got) == target

    current = program
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for path in sorted(node_paths(current.body), key=len):  # outermost first
            if time.monotonic() > deadline:
                break
            candidate = dataclasses.replace(current, body=without(current.body, path))
            if still_fails(candidate):
                current, changed = candidate, True
                break
        if changed:
            continue
        for i in range(len(current.returns)):
            returns = current.returns[:i] + current.returns[i + 1 :]
            candidate = dataclasses.replace(current, returns=returns)
            if still_fails(candidate):
                current, changed = candidate, True
                break
    return current


def write_repro(program, result: Result, out: Path) -> Path:
    name = f"fail_{result.seed.replace(':', '_')}_{result.backend}.py"
    header = {"seed": result.seed, "backend": result.backend, "kind": result.kind,
              "round": result.round}  # fmt: skip
    message = "\n".join("# " + line for line in result.message.splitlines()[:20])
    text = (
        f"# tracer fuzzer failure: {json.dumps(header)}\n{message}\n"
        f"# rerun: python tools/fuzz_tracer.py --repro {out / name}\n\n{program.source()}"
    )
    (out / name).write_text(text)
    return out / name


def replay(path: Path, backends: list[str] | None) -> Result:
    text = path.read_text()
    header = json.loads(text.splitlines()[0].split(":", 1)[1])
    with tempfile.TemporaryDirectory() as tmp:
        return run_source(text, header["seed"], backends or [header["backend"]], Path(tmp))


# ---------------------------------------------------------------------------------------
# many programs: in-process (tests) or in worker subprocesses (CLI)
def feature_set(include: str = "", exclude: str = "") -> frozenset[str]:
    chosen = set(fuzz_programs.FEATURES) - KNOWN_BROKEN
    chosen |= {f for f in include.split(",") if f}
    chosen -= {f for f in exclude.split(",") if f}
    unknown = chosen - set(fuzz_programs.FEATURES)
    if unknown:
        raise SystemExit(f"unknown features: {sorted(unknown)}")
    return frozenset(chosen)


def run_many(
    seeds: list[str],
    backends: list[str],
    features: frozenset[str],
    out: Path | None = None,
    timeout: float = 60.0,
    minimize_failures: bool = True,
    emit=None,
) -> list[Result]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for seed in seeds:
            with contextlib.redirect_stdout(io.StringIO()):
                result = run_program(seed, backends, features, workdir, timeout)
                if result.status == "fail" and out is not None:
                    program = fuzz_programs.generate(seed, features)
                    if minimize_failures:
                        program = minimize(program, result, workdir)
                    result.repro = str(write_repro(program, result, out))
            results.append(result)
            if emit is not None:
                emit(result)
    return results


def worker_main(args) -> None:
    seeds = [f"{args.seed}:{i}" for i in range(args.start, args.start + args.count)]

    def emit(result: Result) -> None:
        sys.__stdout__.write(result.to_json() + "\n")
        sys.__stdout__.flush()

    features = feature_set(args.include, args.exclude)
    COMPILE_OPTIONS["dynamic"] = DYNAMIC[args.dynamic]
    run_many(seeds, args.backends.split(","), features, Path(args.out), args.timeout,
             not args.no_minimize, emit)  # fmt: skip


def drive(args) -> int:
    """Splits the programs in chunks over --jobs worker processes; a worker that dies or
    stops answering is killed, its program counted as a timeout, and the chunk goes on."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    end = args.start + args.count
    pending = [(s, min(args.chunk, end - s)) for s in range(args.start, end, args.chunk)]
    lock = threading.Lock()
    results: list[dict] = []
    log = (out / f"results_{args.seed}.jsonl").open("a")
    started = time.monotonic()

    def record(data: dict) -> None:
        with lock:
            results.append(data)
            log.write(json.dumps(data) + "\n")
            log.flush()
            if data["status"] != "ok":
                first = data["message"].splitlines()[0][:200] if data["message"] else ""
                print(f"[{data['seed']}] {data['status']} {data.get('backend')} "
                      f"{data.get('kind')}: {first} -> {data.get('repro')}", flush=True)  # fmt: skip
            if len(results) % 100 == 0:
                rate = len(results) / (time.monotonic() - started)
                print(f"{len(results)} programs, {rate:.2f}/s", flush=True)

    def run_chunk(start: int, count: int) -> None:
        while count > 0:
            cmd = [
                sys.executable, __file__, "--worker", "--seed", str(args.seed), "--start",
                str(start), "--count", str(count), "--backends", args.backends, "--out",
                str(out), "--timeout", str(args.timeout), "--include", args.include,
                "--exclude", args.exclude, "--dynamic", args.dynamic,
                *(["--no-minimize"] if args.no_minimize else []),
            ]  # fmt: skip
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            last = [time.monotonic()]
            done = threading.Event()

            def watchdog(proc=proc, last=last, done=done) -> None:
                # a program's own limit is --timeout; minimizing takes a few minutes more
                while not done.wait(5):
                    if time.monotonic() - last[0] > args.timeout + 300:
                        proc.kill()
                        return

            threading.Thread(target=watchdog, daemon=True).start()
            for line in proc.stdout:
                last[0] = time.monotonic()
                record(json.loads(line))
                start, count = start + 1, count - 1
            proc.wait()
            done.set()
            if count > 0:  # the worker died or hung on `start`
                record({"seed": f"{args.seed}:{start}", "status": "timeout",
                        "message": f"worker exit {proc.returncode}", "graphs": {},
                        "breaks": {}, "eager_raised": 0})  # fmt: skip
                start, count = start + 1, count - 1

    def slot() -> None:
        while True:
            with lock:
                if not pending:
                    return
                start, count = pending.pop(0)
            run_chunk(start, count)

    threads = [threading.Thread(target=slot) for _ in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    return summarize(results, args)


def summarize(results: list[dict], args) -> int:
    status = Counter(r["status"] for r in results)
    graphs: Counter = Counter()
    breaks: Counter = Counter()
    with_graphs: Counter = Counter()
    for r in results:
        graphs.update(r["graphs"])
        breaks.update(r["breaks"])
        with_graphs.update(b for b, n in r["graphs"].items() if n)
    raised = sum(1 for r in results if r["eager_raised"])
    last = args.start + args.count - 1
    print(f"programs: {len(results)} (seed {args.seed}, {args.start}..{last})")
    print(f"status: {dict(status)}; programs where eager raised in some round: {raised}")
    for backend in args.backends.split(","):
        print(f"  {backend}: graphs {graphs[backend]}, breaks {breaks[backend]}, "
              f"programs with a graph {with_graphs[backend]}")  # fmt: skip
    return 0 if status.get("ok", 0) == len(results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--backends", default="eager,aot_eager")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=50, help="programs per worker process")
    parser.add_argument("--out", default="fuzz_out")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    parser.add_argument("--include", default="", help="features to add (comma separated)")
    parser.add_argument("--exclude", default="", help="features to leave out")
    parser.add_argument("--no-minimize", action="store_true")
    parser.add_argument(
        "--dynamic",
        choices=sorted(DYNAMIC),
        default="none",
        help="ember.compile(dynamic=...): none is automatic (the default)",
    )
    parser.add_argument("--repro", help="run a failure file written by an earlier run")
    parser.add_argument("--print", dest="print_seed", help="print the program SEED:INDEX")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    COMPILE_OPTIONS["dynamic"] = DYNAMIC[args.dynamic]
    if args.print_seed:
        features = feature_set(args.include, args.exclude)
        print(fuzz_programs.generate(args.print_seed, features).source())
        return 0
    if args.repro:
        named = "--backends" in (argv if argv is not None else sys.argv)
        result = replay(Path(args.repro), args.backends.split(",") if named else None)
        print(result.status, result.backend, result.kind, result.round)
        print(result.message)
        return 0 if result.status == "ok" else 1
    if args.worker:
        worker_main(args)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
