"""The progress line: a compile that takes a while says what it is doing, on one line.

    ember: compiling forward (model.py:12) | inductor > codegen > cpp_build | kernels 3/12 | 4.2s

A frame compile (`ProgressFrameCompiler`, what `ember.compile` installs) that is still running
after `AFTER_S` seconds (2) draws this line on stderr and rewrites it in place (`\\r`) every
`REFRESH_S` until the compile ends, then clears it. Nothing is drawn, and no thread started,
when stderr is not a terminal or `ember.config.progress` is False.

Where it learns what happens: the umbrella marks its own steps with `stage(name)` (the
backend's name, autotune's timing); the lower stages, which never import the umbrella, report
through the `ember.events` logger that every stage package writes to (records whose
`ember_event` is the kind and `ember_payload` the payload; see ember_codegen/workers.py):
`stage_begin` / `stage_end` name a stage, `kernels_built` counts finished C++/Triton builds
(`done` of `total` per batch; the line sums the batches of one compile). The logger is set to
DEBUG only while a line is live, and put back as it was.

Test hook: lower `AFTER_S` (0 draws from the start).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any, TextIO

import torch

from ember.backends.registry import BEFORE_TRACE_ATTR
from ember.config import config
from ember_bytecode_tracer.convert_frame import FrameCompiler

AFTER_S = 2.0  # a compile shorter than this never shows the line
REFRESH_S = 0.1
_events = logging.getLogger("ember.events")
_active: _Line | None = None


class _Line(logging.Handler):
    """The state of one compile's line, fed by stage() and by `ember.events` records."""

    def __init__(self, stream: TextIO, what: str) -> None:
        super().__init__(logging.DEBUG)
        self.stream = stream
        self.what = what
        self.start = time.monotonic()
        self.stages: list[str] = []
        self.built = self.total = 0
        self.width = 0  # of the longest text drawn, to blank it out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ember-progress", daemon=True)

    # -- fed by the compile -----------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:  # logging.Handler: one stage event
        handler = _EVENTS.get(getattr(record, "ember_event", None))
        if handler is not None:
            handler(self, getattr(record, "ember_payload", {}))

    def _kernels(self, payload: dict[str, Any]) -> None:
        if payload.get("done") == 0:
            self.total += int(payload.get("total", 0))
        else:
            self.built += 1

    def _stage_begin(self, payload: dict[str, Any]) -> None:
        self.stages.append(str(payload.get("name", "?")))

    def _stage_end(self, payload: dict[str, Any]) -> None:
        name = str(payload.get("name", "?"))
        if name in self.stages:  # pop back to it (a stage left by an exception)
            del self.stages[len(self.stages) - 1 - self.stages[::-1].index(name) :]

    # -- drawn by its thread ------------------------------------------------------------------

    def text(self, columns: int = 10_000) -> str:
        """The line, at most `columns - 1` wide: the name shortens first, so the stage, the
        kernel count and the elapsed time stay readable in a narrow terminal."""
        tail = [" > ".join(self.stages[-3:]) or "trace"]  # no stage yet: tracing
        if self.total:
            tail.append(f"kernels {self.built}/{self.total}")
        tail.append(f"{time.monotonic() - self.start:.1f}s")
        return fit_line(f"ember: compiling {self.what}", " | ".join(tail), columns - 1)

    def _run(self) -> None:
        if self._stop.wait(AFTER_S):
            return
        while True:
            self._draw()
            if self._stop.wait(REFRESH_S):
                return

    def _draw(self) -> None:
        columns = shutil.get_terminal_size(fallback=(100, 24)).columns
        text = self.text(max(columns, 11))  # a wrapped line cannot be rewritten
        self.width = max(self.width, len(text))
        self._write("\r" + text.ljust(self.width))

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal ends the line
            self.stream.write(text)
            self.stream.flush()

    def begin(self) -> None:
        self._thread.start()

    def end(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.width:
            self._write("\r" + " " * self.width + "\r")


_EVENTS: dict[str | None, Callable[[_Line, dict[str, Any]], None]] = {
    "kernels_built": _Line._kernels,
    "stage_begin": _Line._stage_begin,
    "stage_end": _Line._stage_end,
}


def enabled(stream: TextIO | None = None) -> bool:
    """Whether a compile now would draw the line: progress on and stderr a terminal."""
    stream = stream or sys.stderr
    if not config.progress or stream is None:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def compile_progress(what: str) -> Iterator[None]:
    """The line for one compile (the outermost one, where compiles nest)."""
    global _active
    stream = sys.stderr
    if _active is not None or not enabled(stream):
        yield
        return
    line = _active = _Line(stream, what)
    level, propagate = _events.level, _events.propagate
    _events.addHandler(line)
    _events.setLevel(logging.DEBUG)  # the stages' hooks send events only at DEBUG
    _events.propagate = False  # events are data, not EMBER_LOGS lines
    line.begin()
    try:
        yield
    finally:
        line.end()
        _events.removeHandler(line)
        _events.setLevel(level)
        _events.propagate = propagate
        _active = None


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Marks an umbrella step (a backend, autotune's timing) on the live line, if any."""
    line = _active
    if line is None:
        yield
        return
    line.stages.append(name)
    try:
        yield
    finally:
        line._stage_end({"name": name})


def fit_line(head: str, tail: str, width: int) -> str:
    """`head | tail` in `width` characters: `head` loses its end (marked by an ellipsis)
    before `tail` loses anything."""
    line = f"{head} | {tail}"
    if len(line) <= width:
        return line
    room = width - len(tail) - 3
    if room >= 8:
        return f"{head[: room - 1]}\u2026 | {tail}"
    return line[:width]


def _describe(code: CodeType, f_locals: Any = None) -> str:
    """What the user knows the frame as: `GPT2LMHeadModel.forward (modeling_gpt2.py:1040)` for
    a module's method, also when a decorator's wrapper runs it (transformers wraps forward in
    a generic `wrapper`: the module is its `self`, the method a function it closes over)."""
    where = f"({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    owner = f_locals.get("self") if isinstance(f_locals, dict) else None
    if not isinstance(owner, torch.nn.Module):
        return f"{code.co_qualname} {where}"
    wrapped = next(
        (v for v in f_locals.values() if inspect.isfunction(v) and v.__code__ is not code
         and getattr(type(owner), v.__name__, None) is not None),
        None,
    )  # fmt: skip
    method = wrapped.__name__ if wrapped is not None else code.co_name
    return f"{type(owner).__name__}.{method} {where}"


def _innermost(backend: Any) -> Any:
    """The backend inside the wrappers around it (partials, DDP's splitter, ...)."""
    for _ in range(8):
        inner = next((getattr(backend, a) for a in _WRAPPED if hasattr(backend, a)), None)
        if inner is None:
            break
        backend = inner
    return backend


def _backend_name(backend: Any) -> str:
    """A backend's name through the wrappers around it."""
    backend = _innermost(backend)
    return getattr(backend, "__name__", None) or type(backend).__name__


#: attributes under which wrappers keep the backend they wrap
_WRAPPED = ("_ember_wrapped_backend", "__wrapped__", "func", "backend")


class ProgressFrameCompiler(FrameCompiler):
    """The tracer's frame compiler with the progress line around each frame it compiles."""

    def __init__(self, backend: Callable, **kwargs: Any) -> None:
        name = _backend_name(backend)

        def staged_backend(gm: Any, example_inputs: list) -> Callable:
            with stage(name):
                return backend(gm, example_inputs)

        # failures name the user's backend ("backend 'inductor' failed"), not this wrapper
        staged_backend.__name__ = staged_backend.__qualname__ = name
        staged_backend._ember_wrapped_backend = backend
        super().__init__(staged_backend, **kwargs)
        self.user_backend = backend
        self.before_trace = getattr(_innermost(backend), BEFORE_TRACE_ATTR, None)

    def compile_miss(self, frame: Any, cache: Any) -> Any:
        if self.before_trace is not None:
            self.before_trace()
        with compile_progress(_describe(frame.f_code, frame.f_locals)):
            return super().compile_miss(frame, cache)
