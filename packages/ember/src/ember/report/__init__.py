"""`python -m ember.report DIR -o report.html`: an Ember trace (EMBER_TRACE_DIR) as one
self-contained HTML page: frames in call order, graph breaks with suggested rewrites,
recompiles, graphs, guards, kernels and compile time by stage; beside it, each process's
compile timeline as Chrome trace JSON (stages and kernel builds; chrome://tracing, Perfetto)."""

from __future__ import annotations

from pathlib import Path

from ember.report.load import Trace, load
from ember.report.render import render
from ember.report.timeline import chrome_trace, write_timeline


def timeline_path(output: Path, trace: Trace) -> Path:
    """Where a trace's Chrome-trace JSON goes: beside the page, named after both."""
    return output.with_name(f"{output.stem}.{trace.path.stem}.trace.json")


def write_report(trace_dir: str | Path, output: str | Path) -> Path:
    """Renders every trace file under `trace_dir` into `output`, each trace's compile
    timeline (Chrome trace JSON) beside it, linked; returns the page's path."""
    output = Path(output)
    traces = load(trace_dir)
    links = [write_timeline(t, timeline_path(output, t)).name for t in traces]
    output.write_text(render(traces, timelines=links), encoding="utf-8")
    return output


__all__ = ["Trace", "chrome_trace", "load", "render", "write_report"]
