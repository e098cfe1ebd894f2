"""C++ source -> cached shared object -> loaded library, one kernel or a whole graph at once.

`build_library` is the unit of work: compute the content key, return the verified cache
entry if there is one, else build it under the entry's lock (so concurrent processes build
it once) and publish it atomically. `CppBuilder.compile_many` loads the hits directly and
sends the misses of a whole graph to the compile pool together.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ember_codegen._version import __version__
from ember_codegen.cache import KernelCache, atomic_write, content_key, temporary_path
from ember_codegen.cpp.loader import LoadedKernelLibrary
from ember_codegen.cpp.toolchain import Toolchain, discover_toolchain, runtime_header_digest
from ember_codegen.exc import CppCompileError
from ember_codegen.workers import run_jobs
from ember_events import emit, stage

output_code_log = logging.getLogger("ember.output_code")
perf_log = logging.getLogger("ember.perf")


@dataclass(frozen=True)
class BuildResult:
    key: str
    library_path: Path
    source_path: Path
    cache_hit: bool
    seconds: float


def kernel_key(source: str, toolchain: Toolchain, extra_flags: Sequence[str] = ()) -> str:
    """sha256 of everything the .so depends on: source, flags, compiler, header, our version."""
    return content_key(
        [
            "ember-cpp-kernel",
            __version__,
            source,
            "\0".join(toolchain.flags(extra_flags)),
            toolchain.fingerprint,
            runtime_header_digest(),
        ]
    )


def build_library(
    source: str,
    toolchain: Toolchain,
    cache: KernelCache,
    extra_flags: Sequence[str] = (),
    *,
    key: str | None = None,
) -> BuildResult:
    """The verified .so for `source`, from the cache or freshly compiled into it."""
    start = time.perf_counter()
    key = key or kernel_key(source, toolchain, extra_flags)
    entry = cache.entry(key)
    if cache.verify(entry, warn=False):
        return BuildResult(key, entry.library_path, entry.source_path, True, 0.0)
    with cache.locked(entry):
        if cache.verify(entry):  # another process built it while we waited for the lock
            return BuildResult(key, entry.library_path, entry.source_path, True, 0.0)
        cache.discard(entry)
        atomic_write(entry.source_path, source.encode())
        built = temporary_path(entry.library_path)
        command = toolchain.command(entry.source_path, built, extra_flags)
        process = subprocess.run(command, capture_output=True, text=True, check=False)
        if process.returncode != 0 or not built.exists():
            if built.exists():
                os.unlink(built)
            raise CppCompileError(command, process.stdout + process.stderr, str(entry.source_path))
        cache.publish(
            entry, built, compiler=toolchain.version, flags=list(toolchain.flags(extra_flags))
        )
    seconds = time.perf_counter() - start
    output_code_log.info("compiled %s in %.2fs", entry.source_path, seconds)
    return BuildResult(key, entry.library_path, entry.source_path, False, seconds)


class CppBuilder:
    """Builds and loads kernels for one cache directory with one toolchain."""

    def __init__(
        self,
        cache: KernelCache | None = None,
        toolchain: Toolchain | None = None,
        extra_flags: Sequence[str] = (),
    ) -> None:
        self.cache = cache if cache is not None else KernelCache()
        self.toolchain = toolchain if toolchain is not None else discover_toolchain(self.cache)
        self.extra_flags = tuple(extra_flags)

    def build_many(self, sources: Sequence[str]) -> list[BuildResult]:
        """One BuildResult per source, in order; cache misses compile in parallel."""
        start = time.perf_counter()
        keys = [kernel_key(s, self.toolchain, self.extra_flags) for s in sources]
        results: dict[str, BuildResult] = {}
        misses: dict[str, str] = {}
        for key, source in zip(keys, sources, strict=True):
            if key in results or key in misses:
                continue
            entry = self.cache.entry(key)
            if self.cache.verify(entry, warn=False):
                results[key] = BuildResult(key, entry.library_path, entry.source_path, True, 0.0)
            else:
                misses[key] = source
        if misses:  # in parallel on the compile pool, each finished build reported (k/n)
            jobs = [
                functools.partial(
                    build_library, source, self.toolchain, self.cache, self.extra_flags, key=key
                )
                for key, source in misses.items()
            ]
            # re-raises the first CppCompileError
            results.update(zip(misses, run_jobs(jobs), strict=True))
        emit("cache", level="kernel", hits=len(sources) - len(misses), misses=len(misses))
        perf_log.info(  # the compiles' seconds summed against the wall: the pool's gain
            "build_many: %d sources, %d cache hits, %d compiled in %.3fs (compiles %.3fs summed)",
            len(sources), len(sources) - len(misses), len(misses), time.perf_counter() - start,
            sum(results[key].seconds for key in misses),
        )  # fmt: skip
        return [results[key] for key in keys]

    def compile_many(self, sources: Sequence[str]) -> list[LoadedKernelLibrary]:
        """Builds (in parallel) and loads one library per source, in order."""
        with stage("cpp_build"):  # compile (or find in the cache) and load
            return [
                LoadedKernelLibrary(r.library_path, key=r.key, source_path=r.source_path)
                for r in self.build_many(sources)
            ]

    def compile(self, source: str) -> LoadedKernelLibrary:
        return self.compile_many([source])[0]


_builders: dict[tuple[Path, tuple[str, ...]], CppBuilder] = {}


def default_builder(extra_flags: Sequence[str] = ()) -> CppBuilder:
    """A builder for the current cache root (EMBER_CACHE_DIR is re-read on every call)."""
    cache = KernelCache()
    memo_key = (cache.root, tuple(extra_flags))
    if memo_key not in _builders:
        _builders[memo_key] = CppBuilder(cache, extra_flags=extra_flags)
    return _builders[memo_key]


def compile_many(
    sources: Sequence[str], extra_flags: Sequence[str] = ()
) -> list[LoadedKernelLibrary]:
    """Loaded libraries for `sources` (hits from the cache, misses compiled in parallel)."""
    return default_builder(extra_flags).compile_many(sources)


def compile_source(source: str, extra_flags: Sequence[str] = ()) -> LoadedKernelLibrary:
    return default_builder(extra_flags).compile(source)
