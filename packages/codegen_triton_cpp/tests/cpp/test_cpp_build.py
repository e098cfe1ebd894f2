"""Building through the cache: hits, misses, key sensitivity, corruption, races, timing."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from ember_codegen import CppBuilder, CppCompileError, Int64, KernelCache, KernelSignature, Pointer
from ember_codegen.cpp import build as build_module
from ember_codegen.cpp.build import kernel_key

SCALE_SOURCE = r"""
#include "ember_runtime.h"
// %(token)s
EMBER_KERNEL void scale(const float* EMBER_RESTRICT x, float* EMBER_RESTRICT out, float factor,
                        int64_t n) {
#pragma omp parallel for if (n > 100000)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}
"""


def scale_source(token: str | None = None) -> str:
    return SCALE_SOURCE % {"token": token or uuid.uuid4().hex}


def negate_source(token: str) -> str:
    return f"""
#include "ember_runtime.h"
// {token}
EMBER_KERNEL void negate(const int64_t* x, int64_t* out, int64_t n) {{
  for (int64_t i = 0; i < n; ++i) out[i] = -x[i];
}}
"""


def run_negate(library) -> None:
    negate = library.kernel("negate", KernelSignature([Pointer(torch.int64)] * 2 + [Int64]))
    x = torch.arange(-5, 5)
    out = torch.empty_like(x)
    negate(x, out, x.numel())
    assert torch.equal(out, -x)


def test_miss_then_hit(fresh_builder):
    source = negate_source("miss-then-hit")
    (first,) = fresh_builder.build_many([source])
    (second,) = fresh_builder.build_many([source])
    assert not first.cache_hit and second.cache_hit
    assert first.library_path == second.library_path and first.library_path.exists()
    assert first.source_path.read_text() == source
    run_negate(fresh_builder.compile(source))


def test_key_depends_on_source_flags_header_compiler_and_version(builder, monkeypatch):
    toolchain = builder.toolchain
    source = negate_source("key")
    base = kernel_key(source, toolchain)
    assert kernel_key(source, toolchain) == base
    assert kernel_key(source + " ", toolchain) != base
    assert kernel_key(source, toolchain, ["-DEXTRA=1"]) != base
    other_compiler = dataclasses.replace(toolchain, fingerprint="another compiler version")
    assert kernel_key(source, other_compiler) != base
    no_openmp = dataclasses.replace(toolchain, openmp_flags=())
    assert kernel_key(source, no_openmp) != base
    monkeypatch.setattr(build_module, "runtime_header_digest", lambda: "edited header")
    assert kernel_key(source, toolchain) != base
    monkeypatch.undo()
    monkeypatch.setattr(build_module, "__version__", "9.9.9")
    assert kernel_key(source, toolchain) != base


def test_different_flags_build_different_entries(fresh_cache, builder):
    source = negate_source("flags")
    plain = CppBuilder(fresh_cache, toolchain=builder.toolchain).build_many([source])[0]
    defined = CppBuilder(fresh_cache, toolchain=builder.toolchain, extra_flags=["-DEMBER_X=1"])
    other = defined.build_many([source])[0]
    assert plain.key != other.key and not other.cache_hit


@pytest.mark.parametrize("damage", ["truncate", "zero_bytes", "delete_sidecar"])
def test_corrupt_entry_is_rebuilt_not_loaded(fresh_builder, damage):
    source = negate_source(f"corrupt-{damage}")
    (built,) = fresh_builder.build_many([source])
    path = built.library_path
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "zero_bytes":
        path.write_bytes(b"\0" * path.stat().st_size)
    else:
        fresh_builder.cache.entry(built.key).sidecar_path.unlink()
    (rebuilt,) = fresh_builder.build_many([source])
    assert not rebuilt.cache_hit
    assert fresh_builder.cache.lookup(built.key) == path
    run_negate(fresh_builder.compile(source))


def test_entry_of_another_key_is_rebuilt_not_loaded(fresh_builder):
    """An entry copied under another key's name is internally consistent (its sidecar
    matches its .so) but holds another library: rebuilt, never loaded."""
    other, wanted = scale_source(), negate_source("another-key")
    (x,) = fresh_builder.build_many([other])
    (y,) = fresh_builder.build_many([wanted])
    cache = fresh_builder.cache
    source_entry, target = cache.entry(x.key), cache.entry(y.key)
    for name in ("library_path", "sidecar_path", "source_path"):
        getattr(target, name).write_bytes(getattr(source_entry, name).read_bytes())
    assert cache.lookup(y.key) is None
    (rebuilt,) = fresh_builder.build_many([wanted])
    assert not rebuilt.cache_hit and rebuilt.key == y.key
    assert json.loads(target.sidecar_path.read_text())["key"] == y.key
    assert target.source_path.read_text() == wanted
    run_negate(fresh_builder.compile(wanted))
    assert fresh_builder.build_many([wanted])[0].cache_hit


def test_sidecar_without_a_key_is_rebuilt(fresh_builder):
    """An entry of the previous format (no key in its sidecar) is rebuilt once."""
    source = negate_source("keyless-sidecar")
    (built,) = fresh_builder.build_many([source])
    sidecar_path = fresh_builder.cache.entry(built.key).sidecar_path
    sidecar = json.loads(sidecar_path.read_text())
    del sidecar["key"]
    sidecar_path.write_text(json.dumps(sidecar))
    (rebuilt,) = fresh_builder.build_many([source])
    assert not rebuilt.cache_hit
    run_negate(fresh_builder.compile(source))


def test_compile_error_is_typed_and_cleans_up(fresh_builder):
    source = '#include "ember_runtime.h"\nEMBER_KERNEL void broken() { undeclared_thing(); }\n'
    with pytest.raises(CppCompileError, match="undeclared_thing") as info:
        fresh_builder.build_many([source])
    assert Path(info.value.source_path).read_text() == source
    leftovers = [p.name for p in Path(info.value.source_path).parent.iterdir()]
    assert not any(".tmp-" in name or name.endswith(".so") for name in leftovers), leftovers


def test_compile_many_keeps_order_dedupes_and_mixes_hits(fresh_builder):
    cached = negate_source("already-cached")
    fresh_builder.build_many([cached])
    sources = [negate_source("new-a"), cached, negate_source("new-b"), negate_source("new-a")]
    results = fresh_builder.build_many(sources)
    assert [r.cache_hit for r in results] == [False, True, False, False]
    assert results[0].key == results[3].key
    libraries = fresh_builder.compile_many(sources)
    assert [lib.key for lib in libraries] == [r.key for r in results]
    for library in libraries:
        run_negate(library)


def test_compile_many_reports_a_failing_source(fresh_builder):
    sources = [negate_source("fine"), "this is not C++", negate_source("fine-too")]
    with pytest.raises(CppCompileError):
        fresh_builder.compile_many(sources)


def _run_script(cache_dir: Path, source_files: list[Path], start_at: float = 0.0):
    script = Path(__file__).with_name("compile_in_process.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(script), str(cache_dir), str(start_at), *map(str, source_files)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _result(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _write_sources(tmp_path: Path, count: int) -> list[Path]:
    files = []
    for i in range(count):
        path = tmp_path / f"kernel{i}.cpp"
        path.write_text(scale_source(uuid.uuid4().hex))
        files.append(path)
    return files


def test_two_processes_racing_on_one_kernel(tmp_path):
    cache_dir = tmp_path / "cache"
    files = _write_sources(tmp_path, 1)
    start_at = time.time() + 4.0  # both processes past their imports by then
    racers = [_run_script(cache_dir, files, start_at) for _ in range(2)]
    results = [_result(p) for p in racers]
    assert all(r["correct"] == [True] for r in results)
    # the entry's lock makes the loser wait and then find the winner's library
    assert sorted(r["hits"][0] for r in results) == [False, True]
    (entry,) = (cache_dir / "cpp").glob("*/*.so")
    assert KernelCache(cache_dir).lookup(entry.stem) == entry
    assert not list((cache_dir / "cpp").glob("*/.*tmp-*"))


def test_warm_start_is_at_least_5x_faster_than_cold(tmp_path):
    cache_dir = tmp_path / "cache"
    files = _write_sources(tmp_path, 4)
    cold = _result(_run_script(cache_dir, files))
    warm = _result(_run_script(cache_dir, files))
    assert cold["hits"] == [False] * 4 and warm["hits"] == [True] * 4
    assert all(cold["correct"]) and all(warm["correct"])
    ratio = cold["seconds"] / warm["seconds"]
    print(
        f"\ncold start (probe + 4 kernels): {cold['seconds'] * 1e3:.1f} ms, "
        f"warm start: {warm['seconds'] * 1e3:.1f} ms, ratio {ratio:.0f}x"
    )
    assert ratio >= 5.0
