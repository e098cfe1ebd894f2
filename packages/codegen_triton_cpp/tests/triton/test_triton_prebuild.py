"""Kernels built in worker processes (ember_codegen/triton/prebuild.py), on the CPU: Triton
builds a CUDA binary without a GPU when it is told the target, so a worker fills the cache
and the compiling process's own warm-up, with real tensors, must find it there."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import triton

from ember_codegen.triton import prebuild

KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offsets < n
    total = tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask)
    tl.store(out + offsets, total, mask=mask)
"""
TARGET = ["cuda", 90, 32]

# the warm-up compiled.compile_parallel does, with real tensors (one a view one float off an
# aligned storage), under a driver that builds for TARGET without a GPU
WARM_UP = """
import importlib.util, json, sys, torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from ember_codegen.triton.prebuild import CompileOnlyDriver
path, name, target = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
driver.set_active(CompileOnlyDriver(GPUTarget(*target)))
spec = importlib.util.spec_from_file_location(name, path)
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
out = torch.zeros(1001)[1:]
module.add_kernel.warmup(torch.zeros(1000), torch.zeros(1000), out, 1000, grid=(1,),
                         XBLOCK=128, num_warps=4, num_stages=1)
"""


@pytest.fixture
def compiled_build(tmp_path, monkeypatch):
    """A kernel file, a Triton cache folder, and Triton building (not interpreting) for a
    GPU that this machine need not have."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the folder's conftest sets it
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(driver, "_active", prebuild.CompileOnlyDriver(GPUTarget(*TARGET)))
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this Triton has no bundled ptxas")
    path = tmp_path / "kernels.py"
    path.write_text(KERNEL)
    job = prebuild.BuildJob(
        path=str(path), module="prebuild_test_kernels", kernel="add_kernel",
        args=[prebuild.pointer_arg("float32", True)] * 2
        + [prebuild.pointer_arg("float32", False), 1000],
        constexprs={"XBLOCK": 128}, num_warps=4, num_stages=1, target=TARGET,
        cache_dir=str(tmp_path / "cache"),
    )  # fmt: skip
    return job


@pytest.fixture(scope="module")
def worker():
    """One build worker for the module's tests (each start imports torch and Triton),
    started without the folder's TRITON_INTERPRET."""
    interpret = os.environ.pop("TRITON_INTERPRET", None)
    try:
        processes = prebuild.BuildProcesses(1)
    finally:
        if interpret is not None:
            os.environ["TRITON_INTERPRET"] = interpret
    yield processes
    processes.close()


def _entries(job: prebuild.BuildJob) -> set[str]:
    return set(os.listdir(job.cache_dir)) if os.path.isdir(job.cache_dir) else set()


def test_the_warm_up_with_real_tensors_finds_the_workers_binary(compiled_build, worker):
    job = compiled_build
    assert worker.build_all([job]) == (1, [])
    entries = _entries(job)
    assert any(
        name.endswith(".cubin")
        for entry in entries
        for name in os.listdir(f"{job.cache_dir}/{entry}")
    )
    # the compiling process's warm-up, in a process of its own: this one imported Triton
    # to interpret (the folder's conftest), and such a Triton cannot build
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run(
        [sys.executable, "-c", WARM_UP, job.path, job.module, json.dumps(TARGET)],
        env=env, check=True, timeout=120,
    )  # fmt: skip
    assert _entries(job) == entries  # a cache hit: nothing new was built


def test_an_aligned_stand_in_is_another_binary_than_a_misaligned_one(compiled_build, worker):
    job = compiled_build
    aligned = dataclasses.replace(job, args=[prebuild.pointer_arg("float32", True)] * 3 + [1000])
    assert worker.build_all([job, aligned]) == (2, [])
    assert len(_entries(job)) == 2


def test_a_job_a_worker_cannot_build_is_reported_and_the_worker_goes_on(compiled_build, worker):
    job = compiled_build
    missing = dataclasses.replace(job, kernel="no_such_kernel")
    built, failures = worker.build_all([missing, job])
    assert built == 1
    assert len(failures) == 1 and "no_such_kernel" in failures[0]


def test_workers_left_idle_are_stopped_and_the_next_build_starts_new_ones(
    compiled_build, monkeypatch
):
    job = compiled_build
    monkeypatch.setattr(prebuild, "IDLE_SECONDS", 0.2)
    try:
        assert prebuild.build_all([job], 1) == (1, [])
        first = prebuild._processes
        deadline = time.monotonic() + 10
        while prebuild._processes is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert prebuild._processes is None
        for worker in first.workers:  # stopped, not left behind
            worker.process.wait(timeout=10)
        aligned = dataclasses.replace(job, args=[prebuild.pointer_arg("float32", True)] * 3 + [8])
        assert prebuild.build_all([aligned], 1) == (1, [])
    finally:
        prebuild.shutdown()


def test_a_workers_warm_up_builds_in_a_folder_of_its_own(compiled_build):
    """A worker started for a GPU target builds a kernel of its own before its first job
    (Triton's back end and LLVM start then, not at the compiling process's first kernel),
    into a folder it removes: the compiling process's cache is not touched."""
    # in a process of its own: this one imported Triton to interpret (the folder's conftest)
    probe = (
        "import json, os, sys; from ember_codegen.triton import build_worker; "
        "print(build_worker.warm_up(json.loads(sys.argv[1])), os.environ['TRITON_CACHE_DIR'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(TARGET)],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert out.stdout.split() == ["True", compiled_build.cache_dir]
    assert _entries(compiled_build) == set()
    processes = prebuild.BuildProcesses(1, TARGET)  # warms up, then serves
    try:
        assert processes.build_all([compiled_build]) == (1, [])
    finally:
        processes.close()


def test_a_worker_file_imports_nothing_of_ember_torch_or_triton():
    """Workers run build_worker.py by its path: starting one imports torch and Triton (for
    building), not the ember_codegen package and what it imports."""
    from ember_codegen.triton import build_worker

    probe = (
        "import runpy, sys; runpy.run_path(sys.argv[1], run_name='probe'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('ember_codegen', 'ember_inductor_ir', 'torch', 'triton', 'sympy')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, build_worker.__file__],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_no_workers_start_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    prebuild.start_build_workers(1)
    assert prebuild._processes is None
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("EMBER_TRITON_BUILD_PROCESSES", "0")
    prebuild.start_build_workers(1)
    assert prebuild._processes is None


def test_no_workers_where_python_is_embedded_in_another_program(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")
    assert prebuild.build_processes(1) is None
    assert prebuild.build_all([], 1) == (0, ["no build worker could start"])


def test_a_concatenations_masked_loads_build_as_16_byte_loads(tmp_path, worker, monkeypatch):
    """The GPU's source of a concatenation (its branches' loads masked), built for sm_90:
    every load is a 16-byte vector. A `tl.where` on a masked load's offset (the
    interpreter's form) hid the offset's contiguity: one element per load instruction."""
    from prim_helpers import prim_graph

    from ember_codegen.triton import cache, index_printer
    from ember_codegen.triton.kernel import build_group
    from ember_inductor_ir import lower, schedule
    from ember_primops import prims

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this Triton has no bundled ptxas")

    def f(a, b):
        return (prims.cat([prims.exp(a), prims.neg(b)], 1),)

    inputs = [torch.randn(64, 224), torch.randn(64, 64)]
    sched = schedule(lower(prim_graph(f, *inputs), inputs, target="triton"))
    (group,) = [g for g in sched if not g.is_extern]
    monkeypatch.setattr(index_printer, "interpreter_source", lambda: False)
    (kernel,) = build_group(group, sched).kernels
    path = tmp_path / "cat_kernels.py"
    path.write_text(cache.module_source([kernel.code]))
    job = prebuild.BuildJob(
        path=str(path), module="prebuild_cat_kernels", kernel=kernel.name,
        args=[prebuild.pointer_arg("float32", True)] * len(kernel.params),
        constexprs=kernel.config.constexprs(kernel.reduction),
        num_warps=kernel.config.num_warps, num_stages=1, target=TARGET,
        cache_dir=str(tmp_path / "cache"),
    )  # fmt: skip
    assert worker.build_all([job]) == (1, [])
    (ptx,) = [p.read_text() for p in (tmp_path / "cache").rglob("*.ptx")]
    loads = re.findall(r"ld\.global[.\w]*", ptx)
    assert loads and all(".v4." in load for load in loads), loads
