"""The JSON-lines trace writer: one file per process, one record per event.

A `logging.Handler` on the `ember.events` logger (the pipe every stage's `ember_events.emit` writes
to). Records carry `seq`, `t` (seconds since the writer started), `event` and, while one is
being compiled, the `frame` and `graph` ids they belong to. Large texts (graph code, kernel
source, bytecode listings, source files) are written once as `blob` records keyed by a content
hash and referred to as `{"blob": id}`; graphs as `graph` records referred to by id. Stage
times are aggregated (exclusive of nested stages) and written as one `stage` record per
graph and stage name when the graph's compile ends, or per frame for `trace`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import sys
import time
import types
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ember.trace.describe import code_info, graph_rows

log = logging.getLogger("ember.trace")
BLOB_MIN = 256  # strings at least this long are written once as a blob and referred to


class TraceWriter(logging.Handler):
    def __init__(self, directory: str | os.PathLike) -> None:
        super().__init__(logging.DEBUG)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = _fresh_path(self.directory)
        self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115  (held open)
        self._t0 = time.perf_counter()
        self._seq = itertools.count()
        self._blobs: set[str] = set()
        self._graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._graph_ids = itertools.count(1)
        self._frame_ids = itertools.count(1)
        self.frame: int | None = None
        self._frame_t = 0.0
        self.graph_stack: list[int] = []
        self._stages: list[list] = []  # [name, start, child seconds]
        self._totals: dict[tuple, list] = {}  # (frame, graph, stage) -> [seconds, count]
        self._warned = False
        self.write("process", pid=os.getpid(), argv=sys.argv, python=sys.version.split()[0],
                   torch=torch.__version__, started=time.time())  # fmt: skip

    # -- the logging side -------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        kind = getattr(record, "ember_event", None)
        if kind is None:
            return
        payload = getattr(record, "ember_payload", {})
        with self.guarded(kind):
            handler = _HANDLERS.get(kind)
            if handler is not None:
                handler(self, **payload)
            else:
                self.write(kind, **payload)

    @contextlib.contextmanager
    def guarded(self, what: str) -> Iterator[None]:
        """A failure to record never fails the compile: warned about once, then quiet."""
        try:
            with self.lock:
                yield
        except Exception:
            if not self._warned:
                self._warned = True
                log.warning("ember.trace: could not record %r (tracing goes on)", what,
                            exc_info=True)  # fmt: skip

    def close(self) -> None:
        self.flush_stages(None)
        if not self._file.closed:
            self._file.close()
        super().close()

    # -- writing ----------------------------------------------------------------------------

    def now(self) -> float:
        return round(time.perf_counter() - self._t0, 6)

    def write(self, event: str, /, **payload: Any) -> None:
        if self._file.closed:
            return
        record = {"seq": next(self._seq), "t": self.now(), "event": event}
        if self.frame is not None and "frame" not in payload:
            record["frame"] = self.frame
        if self.graph_stack and "graph" not in payload:
            record["graph"] = self.graph_stack[-1]
        record.update({k: self.value(v) for k, v in payload.items()})
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def blob(self, text: str, kind: str = "text") -> dict:
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        if key not in self._blobs:
            self._blobs.add(key)
            seq = next(self._seq)
            line = {"seq": seq, "t": self.now(), "event": "blob", "id": key, "kind": kind}
            self._file.write(json.dumps({**line, "text": text}) + "\n")
        return {"blob": key}

    def value(self, value: Any) -> Any:
        """A payload value as JSON: long strings as blobs, graphs by id, code by location."""
        if isinstance(value, str):
            return self.blob(value) if len(value) >= BLOB_MIN else value
        if isinstance(value, torch.fx.GraphModule):
            return {"graph_id": self.graph(value, "prim")}
        if isinstance(value, types.CodeType):
            info = code_info(value)
            return {**info, "file_text": self.file_blob(value.co_filename)}
        if isinstance(value, dict):
            return {str(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        return str(value)

    def file_blob(self, filename: str) -> dict | None:
        import linecache

        lines = linecache.getlines(filename)
        return self.blob("".join(lines), "source") if lines else None

    def graph(self, gm: torch.fx.GraphModule, stage: str, **extra: Any) -> int:
        """The graph's id, writing its `graph` record the first time it is seen."""
        known = self._graphs.get(gm)
        if known is not None:
            return known
        gid = self._graphs[gm] = next(self._graph_ids)
        parent = self.graph_stack[-1] if self.graph_stack else None
        self.write("graph", id=gid, stage=stage, parent=parent, nodes=len(gm.graph.nodes),
                   code=self.blob(gm.code, "python"),
                   table=self.blob(json.dumps(graph_rows(gm)), "graph_table"), **extra)  # fmt: skip
        return gid

    # -- stage times ------------------------------------------------------------------------

    def begin_stage(self, name: str) -> None:
        self._stages.append([name, time.perf_counter(), 0.0])

    def end_stage(self, name: str) -> None:
        # pop up to the matching begin (a stage left open by an exception ends here too)
        while self._stages:
            open_name, start, children = self._stages.pop()
            elapsed = time.perf_counter() - start
            if self._stages:
                self._stages[-1][2] += elapsed
            key = (self.frame, self.graph_stack[-1] if self.graph_stack else None, open_name)
            total = self._totals.setdefault(key, [0.0, 0])
            total[0] += elapsed - children
            total[1] += 1
            self.span(open_name, start, start + elapsed, "MainThread", "stage")
            if open_name == name:
                return

    def span(self, name: str, start: float, end: float, thread: str, kind: str) -> None:
        """One timed interval for the compile's timeline (perf_counter seconds in; seconds
        since the writer started out): a stage, or a kernel build on a worker thread."""
        self.write("span", name=name, kind=kind, thread=thread,
                   start=round(start - self._t0, 6), end=round(end - self._t0, 6))  # fmt: skip

    def flush_stages(self, graph: int | None) -> None:
        """Writes the aggregated stage times of one graph (or of frame level: None)."""
        for key in [k for k in self._totals if k[1] == graph]:
            seconds, count = self._totals.pop(key)
            frame, _, name = key
            self.write("stage", name=name, seconds=round(seconds, 6), count=count,
                       frame=frame, graph=graph)  # fmt: skip

    # -- frames and graphs being compiled ---------------------------------------------------

    def frame_start(self, code: types.CodeType) -> None:
        self.flush_stages(None)
        self._stages.clear()
        self.graph_stack.clear()
        self.frame = next(self._frame_ids)
        self._frame_t = self.now()
        self.begin_stage("trace")

    def frame_end(self) -> None:
        self.end_stage("trace")
        self.flush_stages(None)
        self.frame = None

    def frame_skipped(self, code: types.CodeType, reason: str) -> None:
        self.write("fallback", kind="eager_frame", code=code, reason=reason)
        if self.frame is not None:
            self.frame_end()

    def begin_graph(self, gm: torch.fx.GraphModule, example_inputs: list) -> int:
        gid = self.graph(gm, "torch", inputs=[_describe_input(x) for x in example_inputs])
        self.graph_stack.append(gid)
        self.begin_stage("backend")
        return gid

    def end_graph(self, gid: int | None) -> None:
        if gid is None:  # its begin failed (and was warned about)
            return
        self.end_stage("backend")
        self.flush_stages(gid)
        if self.graph_stack and self.graph_stack[-1] == gid:
            self.graph_stack.pop()

    def graph_id(self, gm: torch.fx.GraphModule) -> int | None:
        return self._graphs.get(gm)


def _describe_input(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)} {value.device}"
    return type(value).__name__


def _fresh_path(directory: Path) -> Path:
    base = f"ember_trace_{os.getpid()}"
    path = directory / f"{base}.jsonl"
    n = 1
    while path.exists():  # a reused pid, or a second writer in one process
        path = directory / f"{base}_{n}.jsonl"
        n += 1
    return path


# Events the writer handles itself instead of writing them as they come.
_HANDLERS = {
    "stage_begin": lambda w, name: w.begin_stage(name),
    "stage_end": lambda w, name: w.end_stage(name),
    "frame_start": lambda w, code: w.frame_start(code),
    "frame_skipped": lambda w, code, reason: w.frame_skipped(code, reason),
    "graph": lambda w, gm, stage, **extra: w.graph(gm, stage, **extra),
    "build_span": lambda w, name, start, end, thread: w.span(name, start, end, thread, "build"),
}
