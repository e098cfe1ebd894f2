"""Reads trace files (ember.trace's JSON lines) into plain objects for the report."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Graph:
    id: int
    stage: str  # torch | aot_forward | aot_backward | aot_inference | prim
    frame: int | None
    parent: int | None
    code: str
    rows: list[list[str]]
    inputs: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)  # compile seconds by stage
    kernels: list[dict] = field(default_factory=list)  # the kernels compiled from it
    wrapper: str | None = None
    loop_ir: str = ""  # the lowered graph (loop IR) as text
    kernel_groups: str = ""  # the schedule: each kernel group's loops and members
    fusion: list[str] = field(default_factory=list)  # the scheduler's decisions, in order


@dataclass
class Frame:
    id: int
    code: dict = field(default_factory=dict)  # name, qualname, file, line, last_line
    file_text: str = ""
    graphs: list[int] = field(default_factory=list)
    breaks: list[dict] = field(default_factory=list)
    recompile: str | None = None
    guards: list[dict] = field(default_factory=list)
    shape_guards: list[dict] = field(default_factory=list)
    symbols: list[dict] = field(default_factory=list)  # size symbols: sources, value, range
    guard_source: str = ""
    bytecode: tuple[str, str] = ("", "")
    stages: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None  # ran eagerly: why
    t: float = 0.0
    compile_id: str = "?"  # "code/attempt": "0/0", "0/1" its recompile, "1/0" the next code

    def symbol_guards(self, symbol: str) -> list[dict]:
        """The shape guards on one size symbol (those whose condition names it)."""
        word = re.compile(rf"\b{re.escape(symbol)}\b")
        return [g for g in self.shape_guards if word.search(str(g.get("text", "")))]

    @property
    def code_key(self) -> tuple:
        """What makes two compiles the same code's (attempts at one frame)."""
        code = self.code
        return (code.get("file"), code.get("qualname"), code.get("line"))


@dataclass
class Trace:
    path: Path
    process: dict = field(default_factory=dict)
    frames: dict[int, Frame] = field(default_factory=dict)
    graphs: dict[int, Graph] = field(default_factory=dict)
    caches: list[dict] = field(default_factory=list)
    fallbacks: list[dict] = field(default_factory=list)
    stages: list[dict] = field(default_factory=list)
    autotune: list[dict] = field(default_factory=list)  # backend="autotune" decisions
    spans: list[dict] = field(default_factory=list)  # timed stages and builds (the timeline)

    def frame(self, fid: int) -> Frame:
        return self.frames.setdefault(fid, Frame(fid))

    def compile_groups(self) -> list[list[Frame]]:
        """Compiles grouped by code (first compiled first), each group's in attempt order;
        sets each frame's `compile_id` ("code/attempt", as torch.compile numbers them)."""
        groups: dict[tuple, list[Frame]] = {}
        for frame in sorted(self.frames.values(), key=lambda f: f.id):
            groups.setdefault(frame.code_key, []).append(frame)
        for n, frames in enumerate(groups.values()):
            for attempt, frame in enumerate(frames):
                frame.compile_id = f"{n}/{attempt}"
        return list(groups.values())

    def break_sites(self) -> list[BreakSite]:
        return break_sites([self])

    def stage_totals(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for s in self.stages:
            totals[s["name"]] = totals.get(s["name"], 0.0) + s["seconds"]
        return totals


@dataclass(frozen=True)
class BreakSite:
    """One place the graph broke (file:line and why), and how often it broke there."""

    location: str
    reason: str
    count: int
    frames: tuple[int, ...] = ()  # the frames (their ids) that broke there


def break_sites(traces: list[Trace]) -> list[BreakSite]:
    """The distinct graph-break sites of the traces, most frequent first (then by place)."""
    seen: dict[tuple[str, str], list[int]] = {}
    for trace in traces:
        for frame in sorted(trace.frames.values(), key=lambda f: f.id):
            for brk in frame.breaks:
                key = (str(brk.get("location", "?")), str(brk.get("reason", "")))
                seen.setdefault(key, []).append(frame.id)
    sites = [BreakSite(loc, why, len(ids), tuple(ids)) for (loc, why), ids in seen.items()]
    return sorted(sites, key=lambda s: (-s.count, s.location, s.reason))


def trace_files(path: str | Path) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        return sorted(path.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    return [path]


def load(path: str | Path) -> list[Trace]:
    """Every trace file under `path` (a directory or one file), oldest first."""
    return [load_file(p) for p in trace_files(path)]


def load_file(path: Path) -> Trace:
    trace = Trace(path)
    blobs: dict[str, str] = {}

    def resolve(value: Any) -> Any:  # blob references -> their text (blobs come first)
        if isinstance(value, dict):
            if set(value) == {"blob"}:
                return blobs.get(value["blob"], "")
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return value

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a process killed mid-write: keep what is whole
                continue
            if record["event"] == "blob":
                blobs[record["id"]] = record["text"]
                continue
            reader = _READERS.get(record["event"])
            if reader is not None:
                reader(trace, resolve(record), text)
    trace.compile_groups()
    return trace


def _process(trace: Trace, r: dict, text) -> None:
    trace.process = r


def _graph(trace: Trace, r: dict, text) -> None:
    rows = json.loads(text(r.get("table")) or "[]")
    trace.graphs[r["id"]] = Graph(
        r["id"], r["stage"], r.get("frame"), r.get("parent"), text(r.get("code")), rows,
        r.get("inputs", []),
    )  # fmt: skip


def _frame(trace: Trace, r: dict, text) -> None:
    frame = trace.frame(r["frame"])
    code = dict(r["code"])
    frame.file_text = text(code.pop("file_text", None))
    frame.code, frame.graphs, frame.t = code, list(r.get("graphs", [])), r["t"]


def _bytecode(trace: Trace, r: dict, text) -> None:
    trace.frame(r["frame"]).bytecode = (text(r.get("original")), text(r.get("rewritten")))


def _guards(trace: Trace, r: dict, text) -> None:
    frame = trace.frame(r["frame"])
    frame.guards, frame.shape_guards = r.get("guards", []), r.get("shape_guards", [])
    frame.symbols = r.get("symbols", [])
    frame.guard_source = text(r.get("source"))


def _break(trace: Trace, r: dict, text) -> None:
    trace.frame(r["frame"]).breaks.append(r)


def _recompile(trace: Trace, r: dict, text) -> None:
    trace.frame(r["frame"]).recompile = r["reason"]


def _stage(trace: Trace, r: dict, text) -> None:
    trace.stages.append(r)
    target = trace.graphs.get(r.get("graph")) if r.get("graph") is not None else None
    owner = target.stages if target is not None else trace.frame(r["frame"]).stages
    if r.get("frame") is None and target is None:
        return
    owner[r["name"]] = owner.get(r["name"], 0.0) + r["seconds"]


def _kernels(trace: Trace, r: dict, text) -> None:
    prim = (r.get("prim_graph") or {}).get("graph_id")
    graph = trace.graphs.get(prim) or trace.graphs.get(r.get("graph"))
    if graph is None:
        return
    for kernel in r.get("kernels", []):
        graph.kernels.append({**kernel, "code": text(kernel.get("code"))})
    if r.get("source"):
        graph.kernels.append({"name": "(whole module)", "fused_nodes": [], "extern": None,
                              "language": r.get("target"), "code": text(r["source"])})  # fmt: skip
    graph.wrapper = text(r.get("wrapper")) or None


def _loop_ir(trace: Trace, r: dict, text) -> None:
    graph = trace.graphs.get((r.get("prim_graph") or {}).get("graph_id"))
    if graph is not None:
        graph.loop_ir, graph.kernel_groups = text(r.get("loop_ir")), text(r.get("kernel_groups"))
        graph.fusion = [text(line) for line in r.get("fusion", [])]


def _cache(trace: Trace, r: dict, text) -> None:
    trace.caches.append(r)


def _fallback(trace: Trace, r: dict, text) -> None:
    trace.fallbacks.append(r)
    if r.get("kind") == "eager_frame":
        frame = trace.frame(r["frame"]) if r.get("frame") is not None else None
        if frame is not None and not frame.code:
            code = dict(r["code"]) if isinstance(r.get("code"), dict) else {}
            frame.file_text = text(code.pop("file_text", None))
            frame.code, frame.skipped, frame.t = code, r.get("reason", ""), r["t"]


def _autotune(trace: Trace, r: dict, text) -> None:
    trace.autotune.append(r)


def _span(trace: Trace, r: dict, text) -> None:
    trace.spans.append(r)


_READERS = {
    "process": _process,
    "graph": _graph,
    "frame": _frame,
    "bytecode": _bytecode,
    "guards": _guards,
    "graph_break": _break,
    "recompile": _recompile,
    "stage": _stage,
    "kernels": _kernels,
    "cache": _cache,
    "fallback": _fallback,
    "autotune": _autotune,
    "span": _span,
    "loop_ir": _loop_ir,
}
