"""Direct launches: the compiled binary's launcher called with pre-packed arguments.

`kernel[grid](...)` binds arguments, computes a specialization key, looks the binary up and
asks for the current stream on every call: tens of microseconds of Python per launch, more
than many fused kernels take on an H200. After the parallel warm-up compile, every kernel's
binary is known, so the wrapper calls its launcher directly with the grid, the stream (read
once per call), the loaded function and its packed metadata.

The binary was specialized on its warm-up arguments: Triton assumes 16-byte alignment of a
pointer that was aligned then. Buffers the wrapper allocates keep their alignment (fresh
storages are aligned, offsets are the layout's); graph inputs and extern results are
checked at run time, and a misaligned one takes the `kernel[grid]` path, which compiles
the matching specialization. Launch hooks (profilers such as proton) see only that path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: Triton specializes a pointer argument as aligned when its address is a multiple of this.
POINTER_ALIGNMENT = 16


@dataclass(frozen=True)
class DirectLaunch:
    """How the wrapper launches one kernel's binary without the JIT front door."""

    run: Any  # the binary's launcher: run(gx, gy, gz, stream, function, metadata, hooks.., *args)
    function: Any
    packed_metadata: Any
    aligned: frozenset[str]  # parameters the binary assumes 16-byte aligned


def direct_launches_enabled() -> bool:
    """On unless EMBER_TRITON_DIRECT_LAUNCH=0 (to compare against, or to let launch hooks
    see every kernel)."""
    return os.environ.get("EMBER_TRITON_DIRECT_LAUNCH", "1") != "0"


def direct_launch(binary: Any, params: Sequence[str], args: Sequence[Any]) -> DirectLaunch | None:
    """The direct launch of a warmed-up binary, or None where its launcher is not reachable
    (another Triton version, a binary that failed to load)."""
    try:
        run = binary.run  # loads the module on the current device
        function, packed = binary.function, binary.packed_metadata
    except Exception:
        return None
    if function is None:
        return None
    aligned = frozenset(
        name
        for name, arg in zip(params, args, strict=True)
        if isinstance(arg, torch.Tensor) and arg.data_ptr() % POINTER_ALIGNMENT == 0
    )
    return DirectLaunch(run, function, packed, aligned)


def current_stream_getter(device: torch.device) -> Any:
    """A zero-argument callable returning the raw current CUDA stream of ``device`` (the
    one a capture records into, so launches land in CUDA graphs too)."""
    if device.type != "cuda":
        return lambda: 0  # no streams (the interpreter's launches ignore it)
    index = device.index if device.index is not None else torch.cuda.current_device()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda: raw(index)
    return lambda: torch.cuda.current_stream(index).cuda_stream


def alignment_check(names: Sequence[str]) -> str:
    """A Python condition that holds when every named tensor is aligned as specialized."""
    if not names:
        return "True"
    addresses = " | ".join(f"{n}.data_ptr()" for n in names)
    return f"({addresses}) % {POINTER_ALIGNMENT} == 0"
