"""The compile pool: a small executor, created on first use and reused, sized to the cores.

Each job runs the compiler as its own process, so compiles run in parallel worker
processes (the g++ processes) while the Python side only waits on them. The pool is a
ThreadPoolExecutor on purpose: a ProcessPoolExecutor would have to start Python workers
(seconds with imports) and, under the spawn start method, re-import the user's __main__
module in each worker, which re-runs an unguarded script. Threads that drive subprocesses
are spawn-safe by construction and start instantly.

Progress: `run_jobs` and `progress_counter` report each finished build as a
`kernels_built` event (`done`, `total`) on the `ember.events` logger, the pipe the stages
share with the umbrella (its progress line and trace writer) without importing it: a record
whose `ember_event` attribute is the kind and `ember_payload` the payload, sent only while a
listener has set that logger's level to DEBUG (otherwise one attribute test).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ember_events import emit, on

ENV_WORKERS = "EMBER_COMPILE_WORKERS"
MAX_DEFAULT_WORKERS = 32

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
T = TypeVar("T")


def pool_size() -> int:
    """EMBER_COMPILE_WORKERS if set, else the CPUs this process may run on (capped)."""
    explicit = os.environ.get(ENV_WORKERS)
    if explicit:
        try:
            return max(1, int(explicit))
        except ValueError:
            raise ValueError(f"{ENV_WORKERS}={explicit!r}: expected a positive integer") from None
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:  # pragma: no cover - macOS / Windows
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def compile_pool() -> ThreadPoolExecutor:
    """The process-wide compile pool, created lazily."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=pool_size(), thread_name_prefix="ember-compile")
        return _pool


def shutdown_pool() -> None:
    """Waits for running compiles and drops the pool (the next compile makes a new one)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)


def report_built(done: int, total: int, what: str = "kernels") -> None:
    """One `kernels_built` event: `done` of `total` builds of the current batch finished."""
    emit("kernels_built", what=what, done=done, total=total)


def progress_counter(total: int, what: str = "kernels") -> Callable[[], None]:
    """Reports 0 of `total` now; the returned tick() (thread-safe) reports one more done."""
    lock = threading.Lock()
    done = 0
    report_built(0, total, what)

    def tick() -> None:
        nonlocal done
        with lock:
            done += 1
            count = done
        report_built(count, total, what)

    return tick


def timed_job(job: Callable[[], T], name: str) -> Callable[[], T]:
    """The job, its run reported as a `build_span` event (`start`/`end`: perf_counter
    seconds, `thread`: the worker's name) when a listener is on: a compile's timeline."""
    if not on():
        return job

    def run() -> T:
        start = time.perf_counter()
        try:
            return job()
        finally:
            emit("build_span", name=name, start=start,
                 end=time.perf_counter(), thread=threading.current_thread().name)  # fmt: skip

    return run


def run_jobs(jobs: Sequence[Callable[[], T]], what: str = "kernels") -> list[T]:
    """The jobs' results in order, run on the compile pool (a single job inline: no pool
    round trip), each finished one reported; the first failing job's error is re-raised."""
    tick = progress_counter(len(jobs), what)
    jobs = [timed_job(job, f"build {what} {n + 1}/{len(jobs)}") for n, job in enumerate(jobs)]
    if len(jobs) == 1:
        result = jobs[0]()
        tick()
        return [result]
    futures = [compile_pool().submit(job) for job in jobs]
    for _ in concurrent.futures.as_completed(futures):
        tick()
    return [future.result() for future in futures]


def _forget_pool_in_child() -> None:
    # A forked child inherits the executor object but not its threads: start afresh.
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
