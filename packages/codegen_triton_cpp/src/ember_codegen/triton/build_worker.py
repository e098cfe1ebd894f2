"""The build worker's side of prebuild.py: a process that builds Triton kernels (never
launches them) into Triton's cache, one JSON job a line on stdin, one JSON reply a line on
stdout.

It is run by its file path (prebuild.py starts it through `runpy`), so that starting it
imports neither the ember_codegen package (about 0.8 s of imports) nor anything else of
Ember: only torch and Triton. Nothing here imports them at module level either (the
compiling process imports this module for `CompileOnlyDriver`). Started with a GPU target
(its argument, JSON), a worker first builds one small kernel of its own: a process's first
build pays for Triton's back end and LLVM starting (about 0.6 s more than a later one, on
the CPU), which the worker then pays while the compiling process still traces.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

#: the warm-up build's kernel (a worker's own, built into a folder of its own)
#: what prebuild runs by its path in each worker process
WORKER_PATH = os.path.abspath(__file__)

WARM_UP_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def warm_up(x, out, n, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.exp(tl.load(x + offsets, mask=mask)), mask=mask)
"""


class CompileOnlyDriver:
    """What Triton asks its active driver while building (not launching) a kernel: the
    compiling process's target, a device index and a stream, none of which touches a GPU."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


def _stand_in(arg: Any) -> Any:
    """A worker's argument for a job's: a pointer as an object Triton specializes like a
    tensor of that dtype and alignment, a size as itself."""
    import torch
    from triton.runtime.jit import MockTensor

    if not (isinstance(arg, list) and arg and arg[0] == "ptr"):
        return arg
    _, dtype, aligned = arg

    class Pointer(MockTensor):
        def data_ptr(self) -> int:  # Triton reads alignment off the address
            return 0 if aligned else 8

    return Pointer(getattr(torch, dtype))


def _build_launcher(binary: Any, backend: str) -> str:
    """The binary's launcher built too (Triton compiles one small C module per argument
    signature, with the C compiler, into the same cache); "ok" or why not. It needs the
    CUDA driver library to load, not a GPU context."""
    if backend != "cuda":
        return "not a cuda binary"
    try:
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(binary.src, binary.metadata)
    except Exception as exc:  # the compiling process builds it at the kernel's first load
        return f"{type(exc).__name__}: {exc}"[:200]
    return "ok"


def build_kernel(job: Any, modules: dict[str, Any]) -> Any:
    """``job``'s kernel (a prebuild.BuildJob or its fields) built, not launched, under the
    active driver: its compiled binary. ``modules``: kernel files already imported, by path
    (each is imported once)."""
    module = modules.get(job.path)
    if module is None:
        spec = importlib.util.spec_from_file_location(job.module, job.path)
        assert spec is not None and spec.loader is not None
        module = modules[job.path] = importlib.util.module_from_spec(spec)
        sys.modules[job.module] = module
        spec.loader.exec_module(module)
    return getattr(module, job.kernel).warmup(
        *[_stand_in(a) for a in job.args], grid=(1,), **job.constexprs,
        num_warps=job.num_warps, num_stages=job.num_stages,
    )  # fmt: skip


def warm_up(target: list) -> bool:
    """One small kernel built for ``target`` in a cache folder of its own (then removed);
    whether it built. A failure is not reported: the jobs report their own."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    built = False
    previous = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="ember-warm-up-") as folder:
        path = Path(folder) / "warm_up_kernel.py"
        path.write_text(WARM_UP_KERNEL)
        os.environ["TRITON_CACHE_DIR"] = str(Path(folder) / "cache")
        job = SimpleNamespace(
            path=str(path), module="ember_warm_up_kernel", kernel="warm_up",
            args=[["ptr", "float32", True]] * 2 + [1024], constexprs={"XBLOCK": 128},
            num_warps=4, num_stages=1,
        )  # fmt: skip
        try:
            driver.set_active(CompileOnlyDriver(GPUTarget(*target)))
            built = build_kernel(job, {}) is not None
        except Exception:  # a warm-up only: each job reports its own failure
            pass
        finally:
            sys.modules.pop("ember_warm_up_kernel", None)
            if previous is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = previous
    return built


def serve(target: list | None = None) -> None:
    """Builds each job read from stdin; writes one reply per job to stdout."""
    import torch  # noqa: F401 - imported before the first job arrives, not at it
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    if target:
        warm_up(target)
    modules: dict[str, Any] = {}
    for line in sys.stdin:
        job = SimpleNamespace(**json.loads(line))
        start = time.perf_counter()
        try:
            os.environ["TRITON_CACHE_DIR"] = job.cache_dir
            driver.set_active(CompileOnlyDriver(GPUTarget(*job.target)))
            binary = build_kernel(job, modules)
            reply = {"ok": True, "s": round(time.perf_counter() - start, 3)}
            reply["launcher"] = _build_launcher(binary, job.target[0])
        except Exception as exc:  # reported; the compiling process builds it instead
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else None)
