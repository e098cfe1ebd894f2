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

import inspect
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
    #: the launcher's compiled launch function and the flags it takes first, where this
    #: Triton's calling convention is known (raw_launch): called without the launcher's
    #: Python frame (scratch allocation, hooks), a few microseconds a launch
    raw: Any = None
    raw_flags: tuple[bool, bool] = (False, False)  # (cooperative grid, PDL)


def _takes_grid_stream_function_then_rest(call: Any) -> bool:
    """Triton 3.6's `CudaLauncher.__call__(self, gridX, gridY, gridZ, stream, function, *args)`,
    which forwards `args` (metadata, launch metadata, two hooks, kernel arguments) to
    `launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, global_scratch,
    profile_scratch, *args)`."""
    try:
        params = list(inspect.signature(call).parameters.values())
    except (TypeError, ValueError):
        return False
    names = [p.name for p in params]
    return (
        names == ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]
        and params[-1].kind is inspect.Parameter.VAR_POSITIONAL
    )


#: Triton versions whose launcher's calling convention the wrapper may use directly, each
#: with the check that the installed launcher still has it
RAW_LAUNCH_CONVENTIONS = {"3.6": _takes_grid_stream_function_then_rest}


def raw_launch(run: Any) -> tuple[Any, tuple[bool, bool]] | None:
    """The compiled launch function behind a binary's launcher and its (cooperative, PDL)
    flags, where the launcher needs no scratch memory and this Triton's convention is known;
    else None (the wrapper calls the launcher)."""
    import triton

    check = RAW_LAUNCH_CONVENTIONS.get(".".join(triton.__version__.split(".")[:2]))
    if check is None or not check(type(run).__call__):
        return None
    try:
        scratch = (run.global_scratch_size, run.profile_scratch_size)
        raw, flags = run.launch, (bool(run.launch_cooperative_grid), bool(run.launch_pdl))
    except AttributeError:
        return None
    if any(scratch) or not callable(raw):
        return None
    return raw, flags


def direct_launches_enabled() -> bool:
    """On unless EMBER_TRITON_DIRECT_LAUNCH=0 (to compare against, or to let launch hooks
    see every kernel)."""
    return os.environ.get("EMBER_TRITON_DIRECT_LAUNCH", "1") != "0"


def raw_launches_enabled() -> bool:
    """On unless EMBER_TRITON_RAW_LAUNCH=0 (the launcher's own Python entry instead)."""
    return os.environ.get("EMBER_TRITON_RAW_LAUNCH", "1") != "0"


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
    raw = raw_launch(run) if raw_launches_enabled() else None
    if raw is None:
        return DirectLaunch(run, function, packed, aligned)
    return DirectLaunch(run, function, packed, aligned, raw=raw[0], raw_flags=raw[1])


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
