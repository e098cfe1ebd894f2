"""Threads racing a cold compiled model share its compiles.

Eight threads start together (a barrier) on a freshly reset cache, each calling the compiled
model with both of two input shapes. One compile per code object runs at a time and a thread
that waited re-checks what the others cached: the race compiles exactly the graphs that one
thread calling both shapes compiles, nothing hits the cache limit, nothing runs eagerly.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

import pytest
import torch

import ember
import ember_frame_hook as fh
from conftest import RecordingBackend

THREADS = 8
SHAPES = ((4, 8), (6, 8))


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.ReLU())


def _with_break(model: torch.nn.Module):
    def fn(x):
        y = model(x)
        print(end="")  # a graph break: the rest is a resume function, its own code and cache
        return model[1](y) * 2

    return fn


def _calls(thread: int) -> list[int]:
    """Which shape each call of a thread uses: its own first, then the other, twice over."""
    return [(thread + k) % 2 for k in range(4)]


def _run(compiled, inputs, expected, *, threads: int) -> list[str]:
    """Runs the calls of `threads` threads (racing when more than one); returns failures."""
    failures: list[str] = []
    barrier = threading.Barrier(threads)

    def work(thread: int) -> None:
        barrier.wait()
        for shape in _calls(thread):
            try:
                out = compiled(inputs[shape])
            except BaseException as exc:
                failures.append(f"thread {thread}: {exc!r}")
                return
            if not torch.allclose(out, expected[shape], atol=1e-5, rtol=1e-5):
                failures.append(f"thread {thread}, shape {SHAPES[shape]}: differs from eager")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return failures


def _compiled_graphs(compiled) -> Counter:
    """Graphs compiled, per code object name (resume functions are their own code)."""
    counts: Counter = Counter()
    for record in compiled._ember_compiler.records:
        counts[record.code.co_name] += len(record.graphs)
    return counts


def _once(make, dynamic, backend, *, threads: int, caplog) -> tuple[Counter, int]:
    ember.reset()
    caplog.clear()
    model = _model()
    fn = make(model)
    inputs = [torch.randn(shape) for shape in SHAPES]
    expected = [fn(x) for x in inputs]
    compiled = ember.compile(fn, backend=backend, dynamic=dynamic)
    failures = _run(compiled, inputs, expected, threads=threads)
    assert failures == []
    limits = [r.getMessage() for r in caplog.records if "cache limit" in r.getMessage()]
    assert limits == [], "a code object ran eagerly after hitting the cache limit"
    codes = [r.code for r in compiled._ember_compiler.records]
    assert not [c.co_name for c in codes if fh.is_skipped(c)], "a compiled code was given up"
    graphs = _compiled_graphs(compiled)
    # Afterwards every call of both shapes hits what the race cached.
    for x, want in zip(inputs, expected, strict=True):
        assert torch.allclose(compiled(x), want, atol=1e-5, rtol=1e-5)
    assert _compiled_graphs(compiled) == graphs
    return graphs, len(codes)


# (the compiled callable, dynamic=). With a graph break, dynamic=False: automatic dynamic
# shapes depend on the order in which shapes reach each resume function (one per compile of
# `fn`), and racing threads may meet an order one thread never produces.
MODELS = {"module": (lambda model: model, None), "graph_break": (_with_break, False)}


@pytest.mark.parametrize("backend", ["recording", "inductor"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_racing_threads_compile_what_one_thread_compiles(model, backend, caplog):
    caplog.set_level(logging.WARNING, logger="ember")

    def make_backend():
        return RecordingBackend() if backend == "recording" else backend

    one_backend, race_backend = make_backend(), make_backend()
    make, dynamic = MODELS[model]
    alone, frames_alone = _once(make, dynamic, one_backend, threads=1, caplog=caplog)
    raced, frames_raced = _once(make, dynamic, race_backend, threads=THREADS, caplog=caplog)
    assert sum(alone.values()) >= 2  # both shapes: a recompile each code object
    assert raced == alone
    assert frames_raced == frames_alone
    if backend == "recording":
        assert len(race_backend.graphs) == len(one_backend.graphs) == sum(alone.values())
