"""The Triton kernels Ember generates for a suite model at its GPU size, made on a machine
without a GPU: the model's step is compiled on the CPU with the Triton target forced and
Triton's interpreter selected, and stopped at its first kernel launch, so only tracing and
code generation are paid for. The kernels' loop shapes, fusion and reduction splits are
those the GPU would get for these sizes (what a session with no device time left can still
compare between two trees). A training step's plan holds its forward and its backward (aot
compiles both before the forward runs); an optimizer's graph, compiled at its first call, is
not in it.

    python tools/triton_plan.py --model resnet50 --mode train-bf16 --out /tmp/plan-main
    python tools/triton_plan.py --compare /tmp/plan-old /tmp/plan-main

Writes OUT/kernels.txt (one line per kernel, in the order generated: name, its loop shape
from the header each generated kernel carries, and its launch's grid and block sizes from the
wrapper), OUT/sources/ (every generated kernel and wrapper file) and OUT/peaks.txt (each
graph's planned storage peak: memory compared between trees without a GPU).
Autocast runs on the CPU's policy (convolutions and matmuls in bf16 on both devices).
Needs the suite's libraries (timm, torchvision or transformers) on the path.

The kernels are generated in the GPU's forms (EMBER_TRITON_SOURCE=gpu), never run. `--ptx`
also builds each one for an H100/H200 (sm_90, Triton's own ptxas, no GPU needed) and writes
OUT/ptx.txt: per kernel its global loads and stores by PTX width (`ld.global.b16` loads one
bfloat16 per instruction, `ld.global.v4.b32` eight), its shared memory, its registers and
the bytes it spills to local memory (ptxas -v), and its build time; the kernels that spill
first, then those with scalar loads: what the GPU will run, read on the CPU.

`--variant NAME` applies one of tools/gpu/bisect_variants.py's VARIANTS first (a choice
switched, for `--compare` against the plan without it).

`--stages` prints the compile's Python stages (trace, decompose, aot, lower, schedule,
codegen: seconds summed over its graphs, from the compile trace) and writes OUT/profile.txt,
the compile's heaviest functions (OUT/profile.prof, the whole profile, for pstats): the part of a cold compile that is not Triton's build,
measured on the CPU (the builds are `--ptx`'s).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = re.compile(r"_k_(\w+)\[(\([^\]]*\))\]\((.*)\)$", re.M)
# a kernel's header, then its definition or its alias of an earlier kernel of the same code
KERNEL = re.compile(
    r"^# \S+: (loops [^\n]*)\n(?:@triton\.jit[^\n]*\ndef (\w+)\(|(\w+) = \w+  # the same code)",
    re.M,
)


#: `kX = kY  # the same code`: a kernel emitted as an alias of an earlier one
ALIAS = re.compile(r"^(\w+) = (\w+)  # the same code$", re.M)


class _Planned(BaseException):
    """Raised at the first kernel launch: everything before it has been generated (not an
    Exception, so that no fallback handler takes it for the user's error and runs the graph
    eagerly to see)."""


def _plan(args: argparse.Namespace) -> None:
    cache = Path(tempfile.mkdtemp(prefix="ember-plan-"))
    if args.stages:
        os.environ["EMBER_TRACE_DIR"] = str(cache / "trace")
    os.environ.update(
        TRITON_INTERPRET="1", EMBER_INDUCTOR_TARGET="triton", EMBER_CACHE_DIR=str(cache),
        EMBER_ARTIFACT_CACHE="0", HF_HUB_OFFLINE="1", EMBER_TRITON_SOURCE="gpu",
    )  # fmt: skip
    from triton.runtime import interpreter  # after TRITON_INTERPRET is set

    if args.variant:  # a code-generation choice switched (tools/gpu/bisect_variants.py)
        sys.path.insert(0, str(ROOT / "tools" / "gpu"))
        from bisect_variants import VARIANTS

        VARIANTS[args.variant]()

    def stop(self, *args, **kwargs):
        raise _Planned

    interpreter.InterpretedFunction.run = stop
    sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))
    import torch
    from cases import BUILDERS
    from models import entries
    from run import make_step

    import ember_codegen.api as codegen_api

    graphs = []  # every compiled graph, for the PTX pass

    peaks: list[PlannedPeak] = []  # each graph's planned storage peak

    def keep(sched, *a, **k):
        graphs.append(compile_triton(sched, *a, **k))
        unstored = {name for group in graphs[-1].groups for name in group.register_only}
        held: dict[str, int] = {}
        peak = sched.peak_bytes(held, unstored)
        at = held.pop("")
        described = [(name, size, _buffer_shape(sched, name)) for name, size in held.items()]
        peaks.append(
            PlannedPeak(len(sched), peak, sched.live_bytes_bound(), sched[at].name, described)
        )
        return graphs[-1]

    compile_triton, codegen_api.compile_triton = codegen_api.compile_triton, keep
    torch.manual_seed(0)
    case = BUILDERS[args.suite](entries(args.suite, [args.model])[0], args.size)
    case.model.train(args.mode.startswith("train"))
    # one eager step first, as the suite runner's warm-up does: a model that fills a cache on
    # its first call (ConViT's relative indices) is traced in the state the suite measures
    make_step(case, "eager", args.mode, "cpu")()
    step = make_step(case, "ember", args.mode, "cpu")
    profiler = cProfile.Profile() if args.stages else contextlib.nullcontext()
    start = time.perf_counter()
    with contextlib.suppress(_Planned), profiler:
        step()
    seconds = time.perf_counter() - start
    write_plan(cache, Path(args.out))
    write_peaks(peaks, Path(args.out))
    if args.stages:
        write_stages(cache / "trace", profiler, seconds, Path(args.out))
    if args.ptx:
        write_ptx(graphs, Path(args.out))
    shutil.rmtree(cache, ignore_errors=True)


def write_stages(trace: Path, profiler: cProfile.Profile, seconds: float, out: Path) -> None:
    """Print the compile's stage seconds; OUT/profile.txt: its 60 heaviest functions."""
    import json

    stages: Counter = Counter()
    for path in trace.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "stage":
                stages[record["name"]] += record["seconds"]
    shown = " ".join(f"{name} {s:.2f}" for name, s in stages.most_common() if s >= 0.005)
    print(f"compile {seconds:.2f} s to the first launch; stages: {shown}")
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(60)
    stats.sort_stats("cumulative").print_stats(r"packages/", 80)
    (out / "profile.txt").write_text(text.getvalue())
    stats.dump_stats(out / "profile.prof")  # for pstats' callers and callees


def write_ptx(graphs: list, out: Path) -> None:
    """OUT/ptx.txt: each kernel of `graphs` built for sm_90 in a process without the
    interpreter (tools/triton_plan.py --ptx-jobs), its loads and stores by width."""
    import json
    import subprocess

    from ember_codegen.triton.compiled import _stand_in_args
    from ember_codegen.triton.prebuild import BuildJob

    jobs = []
    launched = 0
    for graph in graphs:
        source = out / "sources" / Path(graph.module_path).name
        # a kernel the module aliases to an earlier one of the same code is built once per
        # signature, as compile_parallel builds it
        aliases = dict(ALIAS.findall(source.read_text()))
        seen = set()
        for group in graph.groups:
            for kernel in group.kernels:
                if kernel.size_params:  # symbolic sizes: no stand-in values here
                    continue
                launched += 1
                job = BuildJob(
                    path=str(source), module=source.stem, kernel=kernel.name,
                    args=_stand_in_args(kernel, group, graph.launch_layouts, {}),
                    constexprs=kernel.config.constexprs(kernel.reduction),
                    num_warps=kernel.config.num_warps, num_stages=kernel.config.num_stages,
                    target=["cuda", 90, 32], cache_dir="",
                )  # fmt: skip
                key = (aliases.get(kernel.name, kernel.name), json.dumps(job.args),
                       json.dumps(job.constexprs), job.num_warps, job.num_stages)  # fmt: skip
                if key not in seen:
                    seen.add(key)
                    jobs.append(job.line())
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-plan-ptx-")
    done = subprocess.run(
        [sys.executable, __file__, "--ptx-jobs", "-"], input="".join(jobs),
        env=env, text=True, capture_output=True, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rows.sort(key=lambda r: (-r.get("spill", 0), -r.get("scalar_loads", 0), r["kernel"]))
    lines = [_ptx_line(r) for r in rows]
    (out / "ptx.txt").write_text("\n".join(lines) + "\n")
    scalar = sum(1 for r in rows if r.get("scalar_loads"))
    spilled = sum(1 for r in rows if r.get("spill"))
    seconds = sum(r.get("s", 0.0) for r in rows)
    print(f"ptx: {len(rows)} of {len(jobs)} distinct kernels ({launched} launched) built for "
          f"sm_90 in {seconds:.1f} s, "
          f"{scalar} with element-by-element loads, {spilled} spilling registers: "
          f"{out / 'ptx.txt'}")  # fmt: skip
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)


def _ptx_line(row: dict) -> str:
    if "error" in row:
        return f"{row['kernel']}: not built: {row['error']}"
    loads = " ".join(f"{k}x{n}" for k, n in sorted(row["loads"].items()))
    stores = " ".join(f"{k}x{n}" for k, n in sorted(row["stores"].items()))
    return (f"{row['kernel']}: scalar loads {row['scalar_loads']} | loads {loads} | "
            f"stores {stores} | shared {row['shared']} B | regs {row.get('regs', '?')} | "
            f"spilled {row.get('spill', '?')} B | sass {row.get('sass', '?')} (mufu "
            f"{row.get('mufu', '?')}, 64-bit int {row.get('int64', '?')}) | "
            f"build {row['s']:.2f} s")  # fmt: skip


#: a global load or store's width, from its PTX instruction (ld.global.v4.b32, ld.global.b16)
PTX_ACCESS = re.compile(r"\b(ld|st)\.global(?:\.[a-z]+)*?((?:\.v[248])?\.[bfsu]\d+)\b")


def _ptx_jobs(stream) -> None:
    """The --ptx-jobs worker: each JSON job built for sm_90 (Triton's compile-only driver,
    ember_codegen.triton.prebuild), one JSON line of its PTX accesses per job."""
    import json
    import time

    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    from ember_codegen.triton.prebuild import BuildJob, CompileOnlyDriver, build_kernel

    target = GPUTarget("cuda", 90, 32)
    driver.set_active(CompileOnlyDriver(target))
    modules: dict = {}
    for line in stream:
        if not line.strip():
            continue
        job = BuildJob(**json.loads(line))
        row = {"kernel": job.kernel}
        try:
            start = time.perf_counter()
            binary = build_kernel(job, modules)
            row["s"] = round(time.perf_counter() - start, 3)
            accesses = {"ld": Counter(), "st": Counter()}
            for op, width in PTX_ACCESS.findall(binary.asm["ptx"]):
                accesses[op][width.lstrip(".")] += 1
            row["loads"], row["stores"] = dict(accesses["ld"]), dict(accesses["st"])
            row["scalar_loads"] = sum(n for w, n in accesses["ld"].items() if not w.startswith("v"))
            row["shared"] = int(getattr(binary.metadata, "shared", 0) or 0)
            row.update(_registers(binary.asm["ptx"]))
        except Exception as exc:  # reported in ptx.txt
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(json.dumps(row), flush=True)


def _registers(ptx: str) -> dict:
    """Registers a thread and bytes spilled to local memory, as ptxas reports them for sm_90
    (a spilling kernel reads and writes local memory on every use of what it spilled)."""
    import subprocess
    import tempfile

    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        done = subprocess.run(
            [str(ptxas), "-arch=sm_90a", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True, text=True,
        )  # fmt: skip
        sass = subprocess.run(
            [str(ptxas.parent / "cuobjdump"), "-sass", str(Path(tmp) / "k.cubin")],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
    report = done.stdout + done.stderr
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", report)
    return {"regs": int(regs[1]) if regs else -1, "spill": sum(int(n) for n in spills),
            **_sass_counts(sass)}  # fmt: skip


#: a SASS instruction line of cuobjdump: /*0a30*/  @!P0 FFMA R3, R2, R5, R4 ;
SASS_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?")


def _sass_counts(sass: str) -> dict:
    """The kernel's static SASS instructions: all, the special-function unit's (MUFU: rcp,
    rsqrt, ex2, ...; a quarter of the FMA rate) and the 64-bit integer ones (IMAD.WIDE,
    IADD.64-like pairs show as IADD3.X). Per element of a pointwise kernel: divide by the
    elements a thread handles (XBLOCK / (32 * num_warps)); a loop counts its body once."""
    ops = [m[1] for m in SASS_OP.finditer(sass) if m[1] not in ("NOP", "EXIT", "BRA")]
    wide = sum(1 for m in SASS_OP.finditer(sass) if m[2] and (".WIDE" in m[2] or ".X" in m[2]))
    return {"sass": len(ops), "mufu": ops.count("MUFU"), "int64": wide}


def _buffer_shape(sched: Any, name: str) -> str:
    buf = sched.buffers[name]
    sizes = ", ".join(str(sched.size_hint(d)) for d in buf.get_size())
    return f"{str(buf.get_dtype()).removeprefix('torch.')}[{sizes}]"


@dataclass
class PlannedPeak:
    """One graph's planned storage peak: its groups, the peak and the bound without in-place
    writes (bytes), the group after which it is reached, the storages then held (each named
    by its first buffer, with its bytes and shape)."""

    groups: int
    peak: int
    bound: int
    at_group: str
    held: list[tuple[str, int, str]]


def write_peaks(peaks: list[PlannedPeak], out: Path) -> None:
    """OUT/peaks.txt: each graph's planned peak of storages (scheduler/peak.py: graph inputs
    and library workspaces not counted), in the order compiled, then the storages held at
    that peak, largest first (printed: the summary lines)."""
    lines, details = [], []
    for k, p in enumerate(peaks):
        lines.append(
            f"graph {k}: {p.groups} groups, planned peak {p.peak / 2**20:.1f} MiB, "
            f"without in-place writes {p.bound / 2**20:.1f} MiB"
        )
        details.append(f"graph {k}: held after {p.at_group}")
        for name, size, shape in sorted(p.held, key=lambda item: -item[1]):
            details.append(f"  {size / 2**20:9.1f} MiB  {name}  {shape}")
    (out / "peaks.txt").write_text("\n".join(lines + details) + "\n")
    print("\n".join(lines))


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
        kernels = [(m.group(2) or m.group(3), m.group(1)) for m in KERNEL.finditer(f.read_text())]
        names = {name for name, _ in kernels}
        launches = max(wrappers, key=lambda w: len(names & w.keys()), default={})
        lines += [
            f"{name}: {loops} | {launches.get(name, 'not launched')}" for name, loops in kernels
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
    p.add_argument("--ptx", action="store_true", help="also build every kernel for sm_90")
    p.add_argument("--variant", help="a name in tools/gpu/bisect_variants.py's VARIANTS")
    p.add_argument("--stages", action="store_true", help="the compile's stage seconds, profiled")
    p.add_argument("--ptx-jobs", help=argparse.SUPPRESS)  # the --ptx worker ("-": stdin)
    args = p.parse_args()
    if args.ptx_jobs == "-":
        _ptx_jobs(sys.stdin)
        return 0
    if args.ptx_jobs:
        with open(args.ptx_jobs) as jobs:
            _ptx_jobs(jobs)
        return 0
    if args.compare:
        return _compare(*args.compare)
    if not (args.model and args.out):
        p.error("--model and --out are needed to make a plan (or --compare BEFORE AFTER)")
    _plan(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
