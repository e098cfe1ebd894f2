"""Run as a script by the tests: builds and loads kernels in a process of its own.

argv: cache_dir, start_at (a time.time() to wait for, 0 for none), then kernel sources as
files. Prints one JSON line: seconds spent in compile_many (toolchain discovery included),
which sources were cache hits, and whether each library's `scale` kernel computed right.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from ember_codegen import CppBuilder, Float32, Int64, KernelCache, KernelSignature, Pointer


def main() -> None:
    cache_dir, start_at, *source_files = sys.argv[1:]
    sources = [Path(f).read_text() for f in source_files]
    x = torch.arange(1000, dtype=torch.float32)
    while time.time() < float(start_at):
        time.sleep(0.001)
    start = time.perf_counter()
    builder = CppBuilder(KernelCache(cache_dir))
    results = builder.build_many(sources)
    libraries = builder.compile_many(sources)
    seconds = time.perf_counter() - start
    correct = []
    for library in libraries:
        scale = library.kernel(
            "scale", KernelSignature([Pointer(torch.float32)] * 2 + [Float32, Int64])
        )
        out = torch.empty_like(x)
        scale(x, out, 3.0, x.numel())
        correct.append(torch.equal(out, x * 3.0))
    print(
        json.dumps({"seconds": seconds, "hits": [r.cache_hit for r in results], "correct": correct})
    )


if __name__ == "__main__":
    main()
