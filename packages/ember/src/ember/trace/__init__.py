"""`EMBER_TRACE_DIR=DIR` (or `ember.config.trace_dir`): a structured trace of every compile.

One JSON-lines file per process in DIR (see writer.py for the record format and the package
README for the event kinds); `python -m ember.report DIR` renders it as HTML. The stages emit
events through `ember_events.emit` into the `ember.events` logger; this package installs
the writer on that logger and adds what the umbrella sees itself (frames, torch-level graphs).
With no trace directory set nothing is installed and every hook is a no-op.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

from ember.config import config
from ember.trace.frames import write_frame
from ember.trace.hooks import emit, stage
from ember.trace.writer import TraceWriter

_logger = logging.getLogger("ember.events")
_writer: TraceWriter | None = None


def trace_dir() -> str | None:
    return config.trace_dir or os.environ.get("EMBER_TRACE_DIR") or None


def active() -> TraceWriter | None:
    return _writer


def configure() -> TraceWriter | None:
    """Installs (or removes) the writer to match the trace directory; one file per process."""
    global _writer
    directory = trace_dir()
    if directory is not None:
        directory = os.path.abspath(directory)
    if _writer is not None and str(_writer.directory) != directory:
        close()
    if directory is not None and _writer is None:
        _writer = TraceWriter(directory)
        _logger.addHandler(_writer)
        _logger.setLevel(logging.DEBUG)
        _logger.propagate = False  # events are data, not log lines for EMBER_LOGS's handler
    return _writer


def close() -> None:
    """Ends the current trace file (the next compile with a trace directory starts another)."""
    global _writer
    if _writer is not None:
        _logger.removeHandler(_writer)
        _logger.setLevel(logging.NOTSET)  # events off again (the stages' hooks test this)
        _writer.close()
        _writer = None


def traced_backend(backend: Callable) -> Callable:
    """The backend, with the torch-level graph it receives and its compile time recorded."""

    @functools.wraps(backend)
    def compile_graph(gm: Any, example_inputs: list) -> Callable:
        writer = _writer
        if writer is None:
            return backend(gm, example_inputs)
        gid = None
        with writer.guarded("graph"):
            gid = writer.begin_graph(gm, example_inputs)
        try:
            return backend(gm, example_inputs)
        finally:
            with writer.guarded("graph end"):
                writer.end_graph(gid)

    compile_graph._ember_wrapped_backend = backend  # compilers of equal backends share code
    return compile_graph


def on_frame(record: Any) -> None:
    """The frame compiler's on_record: the frame's events (after the EMBER_LOGS lines)."""
    if _writer is not None:
        with _writer.guarded("frame"):
            write_frame(_writer, record)


__all__ = [
    "active",
    "close",
    "configure",
    "emit",
    "on_frame",
    "stage",
    "trace_dir",
    "traced_backend",
]
