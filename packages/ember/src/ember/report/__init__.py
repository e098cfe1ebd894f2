"""`python -m ember.report DIR -o report.html`: an Ember trace (EMBER_TRACE_DIR) as one
self-contained HTML page: frames in call order, graph breaks with suggested rewrites,
recompiles, graphs, guards, kernels and compile time by stage."""

from __future__ import annotations

from pathlib import Path

from ember.report.load import Trace, load
from ember.report.render import render


def write_report(trace_dir: str | Path, output: str | Path) -> Path:
    """Renders every trace file under `trace_dir` into `output`; returns its path."""
    output = Path(output)
    output.write_text(render(load(trace_dir)), encoding="utf-8")
    return output


__all__ = ["Trace", "load", "render", "write_report"]
