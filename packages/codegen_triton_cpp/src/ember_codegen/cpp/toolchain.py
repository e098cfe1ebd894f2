"""Finds the C++ compiler, probes what it can do on this host, and owns the kernel flags.

The probe (does OpenMP link, does -march=native work and what does it expand to) costs a
few compiler runs, so its result is stored in the kernel cache under toolchain/ and keyed
by the compiler binary's identity and the host's CPU: a warm start runs no compiler at all.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ember_codegen._version import __version__
from ember_codegen.cache import KernelCache, atomic_write, content_key
from ember_codegen.exc import CompilerNotFoundError

log = logging.getLogger("ember.codegen.toolchain")

RUNTIME_DIR = Path(__file__).parent / "runtime"
COMPILER_CANDIDATES = ("g++", "c++", "clang++")
_PROBE_SCHEMA = "1"

# Why these flags (see README "Flags"):
#  -O3                 vectorizes the contiguous inner loops.
#  -ffp-contract=off   no a*b+c -> fma fusion: eager rounds each op separately, and fused
#                      results drift by an ulp per op (GCC's default in GNU mode is "fast").
#  -fno-math-errno     sqrt & co. need not set errno, so they inline and vectorize; the
#                      values are unchanged.
#  -fno-trapping-math  FP operations may be computed speculatively, so selects around them
#                      (where, masked loads, the float16 conversions) if-convert and
#                      vectorize; values are unchanged (nobody unmasks FP traps).
#  -fwrapv             signed integer overflow wraps as in eager instead of being undefined
#                      behaviour the optimizer may exploit.
#  no -ffast-math      it reassociates reductions and assumes no NaN/inf, which breaks
#                      NaN propagation, inf handling and eager's tolerances.
ACCURACY_FLAGS = ("-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fwrapv")
SHARED_LIBRARY_FLAGS = ("-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden", "-pipe", "-g0")

_PROBE_SOURCE = """
#include <omp.h>
extern "C" int ember_probe(void) {
  int n = 0;
#pragma omp parallel reduction(+ : n)
  n += 1;
  return n + omp_get_max_threads();
}
"""


@dataclass(frozen=True)
class Toolchain:
    """A compiler and the flags Ember builds kernels with on this host."""

    compiler: tuple[str, ...]  # argv prefix: ("/usr/bin/g++",) or ("ccache", "g++")
    version: str  # the first line of `--version`
    fingerprint: str  # hash of the full version text and the -march expansion
    openmp_flags: tuple[str, ...]  # ("-fopenmp",) or () when OpenMP is unavailable
    arch_flags: tuple[str, ...]  # ("-march=native",), ("-mcpu=native",) or ()

    @property
    def has_openmp(self) -> bool:
        return bool(self.openmp_flags)

    def flags(self, extra: Sequence[str] = ()) -> tuple[str, ...]:
        """Everything but the include path and file names; this is what the cache key sees."""
        missing_omp = () if self.openmp_flags else ("-Wno-unknown-pragmas",)
        return (
            *ACCURACY_FLAGS,
            *self.arch_flags,
            *self.openmp_flags,
            *missing_omp,
            *SHARED_LIBRARY_FLAGS,
            *extra,
        )

    def command(self, source: Path, output: Path, extra: Sequence[str] = ()) -> list[str]:
        return [
            *self.compiler,
            *self.flags(extra),
            f"-I{RUNTIME_DIR}",
            str(source),
            "-o",
            str(output),
        ]


def find_compiler() -> tuple[str, ...]:
    """CXX if set (it must then work), else the first of g++, c++, clang++ on PATH."""
    cxx = os.environ.get("CXX", "").strip()
    if cxx:
        argv = shlex.split(cxx)
        resolved = shutil.which(argv[0])
        if resolved is None:
            raise CompilerNotFoundError([f"CXX={cxx!r} (not an executable)"])
        return (resolved, *argv[1:])
    for name in COMPILER_CANDIDATES:
        resolved = shutil.which(name)
        if resolved is not None:
            return (resolved,)
    raise CompilerNotFoundError([*COMPILER_CANDIDATES, "$CXX (unset)"])


@functools.cache
def runtime_header_digest() -> str:
    """Hash of every runtime header's name and bytes: editing one invalidates all kernels."""
    parts: list[str | bytes] = []
    for header in sorted(RUNTIME_DIR.glob("*.h")):
        parts += [header.name, header.read_bytes()]
    return content_key(parts)


_toolchains: dict[tuple[tuple[str, ...], Path], Toolchain] = {}


def discover_toolchain(cache: KernelCache) -> Toolchain:
    """The toolchain for this process: memoized, else read from the disk probe, else probed."""
    compiler = find_compiler()
    memo_key = (compiler, cache.root)
    if memo_key in _toolchains:
        return _toolchains[memo_key]
    probe_path = cache.subdirectory("toolchain") / f"{_probe_key(compiler)}.json"
    toolchain = _read_probe(probe_path)
    if toolchain is None:
        toolchain = probe_toolchain(compiler)
        entry = {**asdict(toolchain), "probe_key": probe_path.stem}  # checked on read
        atomic_write(probe_path, json.dumps(entry, indent=1).encode())
        log.info("probed %s: openmp=%s arch=%s", toolchain.version, toolchain.has_openmp,
                 toolchain.arch_flags)  # fmt: skip
    _toolchains[memo_key] = toolchain
    return toolchain


def _probe_key(compiler: tuple[str, ...]) -> str:
    """Identity of the compiler binary and the host CPU (what the probe's answer depends on)."""
    real = os.path.realpath(compiler[0])
    info = os.stat(real)
    return content_key(
        [
            _PROBE_SCHEMA,
            __version__,
            *compiler,
            real,
            str(info.st_mtime_ns),
            str(info.st_size),
            platform.machine(),
            platform.node(),
            _cpu_flags(),
        ]
    )


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _read_probe(path: Path) -> Toolchain | None:
    """The probe saved at `path`; None (probe again) when missing, corrupt, or another
    compiler's or host's probe copied or moved under this name (its key says so)."""
    try:
        data = json.loads(path.read_text())
        if data.pop("probe_key") != path.stem:
            return None
        return Toolchain(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def probe_toolchain(compiler: tuple[str, ...]) -> Toolchain:
    """Runs the compiler a few times to learn its version, OpenMP support and best -march."""
    version_text = _run([*compiler, "--version"]).stdout
    with tempfile.TemporaryDirectory(prefix="ember-probe-") as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text(_PROBE_SOURCE)
        output = str(Path(tmp) / "probe.so")
        base = [*compiler, *SHARED_LIBRARY_FLAGS, str(source), "-o", output]
        openmp = ("-fopenmp",) if _run([*base, "-fopenmp"]).returncode == 0 else ()
        arch: tuple[str, ...] = ()
        for candidate in ("-march=native", "-mcpu=native"):
            if _run([*base, *openmp, candidate, "-Wno-unknown-pragmas"]).returncode == 0:
                arch = (candidate,)
                break
    # What "native" means differs between hosts that may share a cache directory, so the
    # driver's dry run (-###: the expanded target options, no temporary file names when
    # writing to /dev/null) goes into the fingerprint.
    expansion = _run([*compiler, *arch, "-###", "-x", "c++", "-S", os.devnull, "-o", os.devnull])
    return Toolchain(
        compiler=compiler,
        version=version_text.splitlines()[0] if version_text else compiler[0],
        fingerprint=content_key([version_text, expansion.stderr]),
        openmp_flags=openmp,
        arch_flags=arch,
    )


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)
