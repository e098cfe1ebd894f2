"""The compile pool: a small executor, created on first use and reused, sized to the cores.

Each job runs the compiler as its own process, so compiles run in parallel worker
processes (the g++ processes) while the Python side only waits on them. The pool is a
ThreadPoolExecutor on purpose: a ProcessPoolExecutor would have to start Python workers
(seconds with imports) and, under the spawn start method, re-import the user's __main__
module in each worker, which re-runs an unguarded script. Threads that drive subprocesses
are spawn-safe by construction and start instantly.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

ENV_WORKERS = "EMBER_COMPILE_WORKERS"
MAX_DEFAULT_WORKERS = 32

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


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


def _forget_pool_in_child() -> None:
    # A forked child inherits the executor object but not its threads: start afresh.
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
