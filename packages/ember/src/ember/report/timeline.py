"""A trace's compile timeline as Chrome trace JSON (chrome://tracing, ui.perfetto.dev).

Every timed stage (trace, backend, aot, passes, decompose, lower, schedule, codegen,
cpp_build, ...) and every kernel build is one complete event (`"ph": "X"`, `ts`/`dur` in
microseconds since the trace started) of the process (`pid`) on its thread (`tid`: 0 the
compiling thread, then one per compile worker); `args` name the compile id, the function
and the graph. Stages nest as they ran (a stage's children lie within it, on its thread).
"""

from __future__ import annotations

import json
from pathlib import Path

from ember.report.load import Trace

MAIN = "MainThread"


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def chrome_trace(trace: Trace) -> dict:
    """{"traceEvents": [...]}: the trace's spans, with process and thread names."""
    pid = trace.process.get("pid", 0)
    threads = {MAIN: 0}
    for span in trace.spans:
        threads.setdefault(span.get("thread") or MAIN, len(threads))
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": f"ember compile (pid {pid})"}},
    ]  # fmt: skip
    events += [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
         "args": {"name": "compile" if name == MAIN else name}}
        for name, tid in threads.items()
    ]  # fmt: skip
    for span in sorted(trace.spans, key=lambda s: (s["start"], -s["end"])):
        start, end = _us(span["start"]), _us(span["end"])
        events.append({
            "name": span["name"], "cat": span.get("kind", "stage"), "ph": "X",
            "ts": start, "dur": max(0, end - start), "pid": pid,
            "tid": threads[span.get("thread") or MAIN], "args": _args(trace, span),
        })  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _args(trace: Trace, span: dict) -> dict:
    args: dict = {}
    frame = trace.frames.get(span.get("frame"))
    if frame is not None:
        args["compile_id"] = frame.compile_id
        args["function"] = frame.code.get("qualname", "?")
    if span.get("graph") is not None:
        args["graph"] = span["graph"]
    return args


def write_timeline(trace: Trace, path: Path) -> Path:
    path.write_text(json.dumps(chrome_trace(trace)), encoding="utf-8")
    return path
