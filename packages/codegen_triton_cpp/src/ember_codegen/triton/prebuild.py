"""Triton kernels built in worker processes, into Triton's binary cache, before the compiling
process warms them up.

Building a Triton kernel is mostly Python (the front end walks the kernel's AST) under the
GIL: threads overlap only the ptxas subprocess, so a training step's few hundred kernels
took 22-24 s of a 46-s compile on a 16-core host whether 8 or 16 threads built them
(tools/gpu/compile_profile.py). Worker processes build them side by side instead: each
runs `kernel.warmup` with stand-in arguments (a pointer's dtype and whether it is 16-byte
aligned, the size arguments' values), which writes the binary to the cache directory the
compiling process uses. That process's own warm-up (compiled.compile_parallel) then finds
every binary there. A kernel a worker could not build (a worker that failed to start, a
Triton whose internals differ) is built in-process as before: the workers only save time.

The workers never touch the GPU: Triton is given a driver that names the compiling process's
target and device, so no CUDA context is made per worker. They are plain subprocesses
running build_worker.py by its path (one JSON job per line on stdin, one JSON reply per line
on stdout), not multiprocessing's: those would re-import the user's main module. A worker
imports torch and Triton only, and builds a small kernel of its own before its first job
(build_worker.py), so that it is ready when the compiling process's kernels are: the
workers start as a frame using CUDA begins to be traced (ember's inductor backend) or, at the
latest, as its graph is lowered.
EMBER_TRITON_BUILD_PROCESSES=0 turns them off; EMBER_COMPILE_WORKERS sets their number
(default: DEFAULT_WORKERS).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ember_codegen.workers import ENV_WORKERS, pool_size

from .build_worker import WORKER_PATH, CompileOnlyDriver, build_kernel
from .cache import interpreting

#: runs build_worker.py by its path: the ember_codegen package is not imported in a worker
_WORKER_MAIN = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)

ENV_SWITCH = "EMBER_TRITON_BUILD_PROCESSES"
#: workers started unless EMBER_COMPILE_WORKERS says otherwise: each imports torch and Triton
#: (seconds of a core) while the graph is traced, and on the 32-core GPU host 32 of them
#: slowed tracing and decomposition by half and built a 126-kernel graph no sooner than 8
#: (tools/gpu/compile_profile.py, convnext_tiny: first call 21.1 s with 32, 16.4 s with 8)
DEFAULT_WORKERS = 8


def worker_count() -> int:
    """EMBER_COMPILE_WORKERS if set, else DEFAULT_WORKERS (at most a core each)."""
    if os.environ.get(ENV_WORKERS):
        return pool_size()
    return min(DEFAULT_WORKERS, pool_size())


def prebuild_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


@dataclass(frozen=True)
class BuildJob:
    """One kernel's warm-up, in terms a worker can rebuild: its module file and name, each
    argument (("ptr", dtype name, aligned) for a tensor, the value for a size), the
    constexprs and launch options, the target and Triton's cache directory."""

    path: str
    module: str
    kernel: str
    args: list
    constexprs: dict[str, Any]
    num_warps: int
    num_stages: int
    target: list
    cache_dir: str

    def line(self) -> str:
        return json.dumps(self.__dict__) + "\n"


def pointer_arg(dtype: str, aligned: bool) -> list:
    return ["ptr", dtype, aligned]


# -- the compiling process's side --------------------------------------------------------


@dataclass
class _Worker:
    process: subprocess.Popen
    lock: threading.Lock = field(default_factory=threading.Lock)

    def build(self, job: BuildJob) -> dict:
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(job.line())
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"build worker exited (code {self.process.poll()})")
        return json.loads(reply)


class BuildProcesses:
    """A few long-lived worker processes, started once per compiling process and kept for
    its later compiles (each pays for importing torch and Triton once)."""

    def __init__(self, count: int, target: list | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [sys.executable, "-c", _WORKER_MAIN, WORKER_PATH]
        if target is not None:  # each worker's warm-up build is for this target
            command.append(json.dumps(target))
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        self.workers = [
            _Worker(subprocess.Popen(command, text=True, env=env, **pipes)) for _ in range(count)
        ]

    def build_all(self, jobs: Sequence[BuildJob]) -> tuple[int, list[str]]:
        """Builds every job over the workers; (how many were built, the failures' reasons)."""
        pending: queue.SimpleQueue[BuildJob] = queue.SimpleQueue()
        for job in jobs:
            pending.put(job)
        built = 0
        failures: list[str] = []
        lock = threading.Lock()

        def drain(worker: _Worker) -> None:
            nonlocal built
            while True:
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    reply = worker.build(job)
                except (OSError, RuntimeError, ValueError) as exc:
                    with lock:
                        failures.append(f"{job.kernel}: {exc}")
                    return  # a dead worker takes no more jobs; the others drain the rest
                with lock:
                    if reply.get("ok"):
                        built += 1
                    else:
                        failures.append(f"{job.kernel}: {reply.get('error')}")

        threads = [threading.Thread(target=drain, args=(w,), daemon=True) for w in self.workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return built, failures

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()


_lock = threading.Lock()
_processes: BuildProcesses | None = None
_idle_timer: threading.Timer | None = None
#: workers left idle this long are stopped (each holds torch and Triton, a few hundred MB);
#: the next build starts new ones
IDLE_SECONDS = 120.0


def build_processes(count: int) -> BuildProcesses | None:
    """The process-wide workers, started at the first call; None where none can start."""
    global _processes
    with _lock:
        _cancel_idle_stop()
        if _processes is None:
            if not _python_interpreter(sys.executable):
                return None  # Python embedded in another program: nothing to start
            try:
                _processes = BuildProcesses(count, _current_gpu_target())
            except OSError:
                return None
        return _processes


def _current_gpu_target() -> list | None:
    """The target a worker's warm-up builds for: the current CUDA device's, where CUDA is in
    use already (asking does not start it); None elsewhere (ROCm included: no warm-up)."""
    import torch

    if torch.version.hip or not torch.cuda.is_initialized():
        return None
    major, minor = torch.cuda.get_device_capability()
    return ["cuda", major * 10 + minor, 32]


def _python_interpreter(executable: str) -> bool:
    """Whether `executable` is a Python interpreter that `-m` runs a module with (under a
    server or an application embedding Python it names that program instead)."""
    name = os.path.basename(executable or "").lower()
    return name.startswith(("python", "pypy"))


def build_all(jobs: Sequence[BuildJob], count: int) -> tuple[int, list[str]]:
    """`jobs` built over the workers (started if need be), then their idle clock started."""
    processes = build_processes(count)
    if processes is None:
        return 0, ["no build worker could start"]
    try:
        return processes.build_all(jobs)
    finally:
        _schedule_idle_stop()


def start_build_workers(count: int | None = None) -> None:
    """Starts the workers (EMBER_COMPILE_WORKERS of them, else a core each) where a CUDA
    graph's compile begins: their start (importing torch and Triton, a few seconds) then
    overlaps its tracing, decomposition and scheduling. Nothing under Triton's interpreter,
    without Triton, or with EMBER_TRITON_BUILD_PROCESSES=0."""
    if not prebuild_enabled() or importlib.util.find_spec("triton") is None or interpreting():
        return
    build_processes(worker_count() if count is None else count)
    _schedule_idle_stop()


def _cancel_idle_stop() -> None:
    global _idle_timer
    if _idle_timer is not None:
        _idle_timer.cancel()
        _idle_timer = None


def _schedule_idle_stop() -> None:
    global _idle_timer
    with _lock:
        _cancel_idle_stop()
        _idle_timer = threading.Timer(IDLE_SECONDS, shutdown)
        _idle_timer.daemon = True
        _idle_timer.start()


def shutdown() -> None:
    """Stops the workers (at exit, after IDLE_SECONDS without a build, or when asked)."""
    global _processes
    with _lock:
        processes, _processes = _processes, None
    if processes is not None:
        processes.close()


def _forget_workers_in_child() -> None:
    # a forked child (a data loader's worker) must neither use nor stop its parent's workers
    global _processes, _idle_timer, _lock
    _processes = _idle_timer = None
    _lock = threading.Lock()


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_in_child)

__all__ = [
    "BuildJob",
    "BuildProcesses",
    "CompileOnlyDriver",
    "build_all",
    "build_kernel",
    "pointer_arg",
    "shutdown",
    "start_build_workers",
]
