"""Compiler discovery, the probe (and its disk cache), and the flags kernels build with."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ember_codegen import CompilerNotFoundError, KernelCache, discover_toolchain
from ember_codegen.cpp import toolchain as toolchain_module
from ember_codegen.cpp.toolchain import find_compiler, runtime_header_digest


def test_cxx_environment_variable_wins(monkeypatch):
    gxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if gxx is None:
        pytest.skip("no C++ compiler on PATH")
    monkeypatch.setenv("CXX", f"{gxx} -Wall")
    assert find_compiler() == (gxx, "-Wall")


def test_cxx_naming_a_missing_compiler_is_an_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-ember")
    with pytest.raises(CompilerNotFoundError, match="no-such-compiler-ember") as info:
        find_compiler()
    assert "set CXX" in str(info.value)


def test_no_compiler_on_path_names_what_was_tried(monkeypatch, tmp_path):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory
    with pytest.raises(CompilerNotFoundError) as info:
        find_compiler()
    message = str(info.value)
    assert "g++" in message and "clang++" in message and "install" in message


def test_flags_keep_eager_accuracy(builder):
    flags = builder.toolchain.flags()
    assert "-O3" in flags and "-ffp-contract=off" in flags and "-fno-math-errno" in flags
    assert not any(
        flag in flags for flag in ("-ffast-math", "-Ofast", "-funsafe-math-optimizations")
    )


def test_gcc_here_has_openmp_and_native_arch(builder):
    if "g++" not in os.path.basename(builder.toolchain.compiler[0]):
        pytest.skip("the expectation is about GCC")
    assert builder.toolchain.has_openmp
    assert builder.toolchain.arch_flags == ("-march=native",)


def test_probe_is_cached_on_disk(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path / "cache")
    first = discover_toolchain(cache)
    assert list((cache.root / "toolchain").glob("*.json"))
    toolchain_module._toolchains.clear()  # as in a new process

    def no_compiler_runs(*args, **kwargs):
        raise AssertionError(f"the warm probe ran {args[0]}")

    monkeypatch.setattr(subprocess, "run", no_compiler_runs)
    assert discover_toolchain(cache) == first


def test_corrupt_probe_file_is_probed_again(tmp_path):
    cache = KernelCache(tmp_path / "cache")
    first = discover_toolchain(cache)
    (probe,) = (cache.root / "toolchain").glob("*.json")
    probe.write_text("{broken")
    toolchain_module._toolchains.clear()
    assert discover_toolchain(cache) == first


def test_probe_of_another_key_is_probed_again(tmp_path):
    """Another compiler's or host's probe copied under this key's name is not used."""
    import json

    cache = KernelCache(tmp_path / "cache")
    first = discover_toolchain(cache)
    (probe,) = (cache.root / "toolchain").glob("*.json")
    entry = json.loads(probe.read_text())
    assert entry["probe_key"] == probe.stem
    probe.write_text(json.dumps({**entry, "probe_key": "0" * 64, "version": "another cc"}))
    toolchain_module._toolchains.clear()
    assert discover_toolchain(cache) == first  # probed again, not the copy's "another cc"
    assert json.loads(probe.read_text())["probe_key"] == probe.stem


def test_header_digest_covers_the_runtime_header():
    assert len(runtime_header_digest()) == 64
    assert (toolchain_module.RUNTIME_DIR / "ember_runtime.h").is_file()
