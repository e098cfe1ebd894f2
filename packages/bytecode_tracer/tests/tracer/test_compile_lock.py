"""Frames that miss together wait for one compile and then run what it cached.

The test holds the compile lock itself until every thread has missed in the frame hook and
called the compiler, so the threads are sure to be queued behind one another: the first one
in compiles, the others find its entry when they re-check under the lock.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

import ember_frame_hook as fh
from conftest import Compiled
from ember_bytecode_tracer.compile_lock import COMPILE_LOCK

THREADS = 6


def scaled(x, w):
    return torch.relu(x @ w) * 2


def _queue_up(compiled, args_of, threads: int) -> list:
    """Starts `threads` calls of `compiled` while the compile lock is held; lets them go once
    all of them are waiting for it; returns their results (or exceptions)."""
    results: list = [None] * threads
    before = fh.stats()["callbacks"]

    def call(i: int) -> None:
        try:
            results[i] = compiled(*args_of(i))
        except BaseException as exc:
            results[i] = exc

    workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
    with COMPILE_LOCK:
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 30
        while fh.stats()["callbacks"] - before < threads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fh.stats()["callbacks"] - before == threads, "the threads did not all miss"
    for worker in workers:
        worker.join()
    return results


@pytest.mark.parametrize("dynamic", [None, False])
def test_threads_missing_together_share_one_compile(dynamic):
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    compiled = Compiled(scaled, dynamic=dynamic)
    results = _queue_up(compiled, lambda i: (x, w), THREADS)
    for out in results:
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, scaled(x, w))
    assert compiled.backend.graph_count == 1
    assert len(compiled.compiler.records) == 1
    assert len(fh.cache_entries(scaled.__code__)) == 1


def test_waiting_threads_do_not_fill_the_cache_limit():
    """More threads than the cache limit miss the same cold code with two shapes: the limit
    counts what the code object holds (two entries), not the calls that raced."""
    shapes = [torch.randn(4, 8), torch.randn(6, 8)]
    w = torch.randn(8, 3)
    compiled = Compiled(scaled, dynamic=False)
    previous = fh.set_cache_limit(3)
    try:
        results = _queue_up(compiled, lambda i: (shapes[i % 2], w), THREADS)
    finally:
        fh.set_cache_limit(previous)
    for i, out in enumerate(results):
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, scaled(shapes[i % 2], w))
    assert compiled.backend.graph_count == 2
    assert not fh.is_skipped(scaled.__code__)
    assert len(fh.cache_entries(scaled.__code__)) == 2


def test_the_lock_is_reentrant():
    """A thread already holding the lock (a compile further up its own stack) compiles a
    frame of its own without waiting for itself."""
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    compiled = Compiled(scaled)
    with COMPILE_LOCK:
        torch.testing.assert_close(compiled(x, w), scaled(x, w))
    assert compiled.backend.graph_count == 1
