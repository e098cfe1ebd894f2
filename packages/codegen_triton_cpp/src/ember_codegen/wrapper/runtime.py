"""Functions every generated wrapper's namespace holds, whatever the target."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import torch

from ember_codegen.exc import CodegenError

from .held_layouts import extent


def relayout_input(
    t: torch.Tensor,
    position: int,
    size: tuple,
    stride: tuple,
    dtype: torch.dtype,
    *,
    device: torch.device,
    moves_scalars: bool = False,
) -> torch.Tensor:
    """An input whose layout differs from the example the graph was built for: a wrong
    shape, dtype or device raises; other strides are copied to the expected layout.
    ``moves_scalars``: a 0-dim tensor may sit on another device (the wrapper moves it to
    the graph's: the CPU scalars of a GPU graph)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"compiled graph input {position}: expected a tensor, got {type(t)}")
    if tuple(t.shape) != size or t.dtype != dtype:
        raise CodegenError(
            f"compiled graph input {position} is {t.dtype}{list(t.shape)}, but the graph was "
            f"compiled for {dtype}{list(size)}; recompile for these inputs"
        )
    if t.device.type != device.type and (t.dim() > 0 or not moves_scalars):
        raise CodegenError(f"compiled graph input {position} is on {t.device}, expected {device}")
    if all(n <= 1 or a == b for n, a, b in zip(size, t.stride(), stride, strict=True)):
        return t
    return torch.empty_strided(size, stride, dtype=dtype, device=t.device).copy_(t)


#: bytes between two scalars moved together: Triton specializes a pointer on 16-byte alignment
SCALAR_SLOT_BYTES = 16


def pack_scalars(values: Sequence[torch.Tensor]) -> torch.Tensor:
    """0-dim tensors of one dtype as one 2-D block, each value in column 0 of its own
    16-byte row (Triton specializes a pointer on 16-byte alignment)."""
    slot = max(1, SCALAR_SLOT_BYTES // values[0].element_size())
    block = torch.empty((len(values), slot), dtype=values[0].dtype, device=values[0].device)
    block[:, 0] = torch.stack(values)
    return block


def unpack_scalars(block: torch.Tensor) -> list[torch.Tensor]:
    """The 0-dim views of a block from pack_scalars."""
    return list(block[:, 0].unbind())


def scalars_to_device(values: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """0-dim tensors of one dtype on another device (the CPU scalars of a GPU graph: an
    optimizer's step counts) moved in one copy, not one copy each: each is a 0-dim view of
    the moved block, at an aligned address. Values already there are left as they are (a
    CUDA graph's runner moves them before its capture)."""
    if values[0].device == device:
        return list(values)
    return unpack_scalars(pack_scalars(values).to(device, non_blocking=True))


def adopt_extern_output(
    t: torch.Tensor, size: tuple, stride: tuple, offset: int, dtype: torch.dtype
) -> torch.Tensor:
    """An extern kernel's result as the buffer: taken as is when it already has the
    buffer's layout, viewed with it when the two differ only in the strides of size-1
    dimensions (which address nothing: ghostnet's squeeze-excite convolutions return
    [512, 960, 1, 1] maps that were copied twelve times a step), else copied (on its
    device) into a fresh tensor that has it."""
    same_place = tuple(t.shape) == size and t.storage_offset() == offset and t.dtype == dtype
    if same_place and t.stride() == stride:
        return t
    if same_place and (
        0 in size or all(a == b for n, a, b in zip(size, t.stride(), stride, strict=True) if n != 1)
    ):  # (same_place: one rank)
        return t.as_strided(size, stride, offset)
    ADOPTED_COPIES[(tuple(t.shape), t.stride(), t.dtype, stride, dtype)] += 1
    numel = extent((size, stride, offset))
    out = torch.empty(numel, dtype=dtype, device=t.device).as_strided(size, stride, offset)
    return out.copy_(t)


#: the extern results adopt_extern_output copied, by (shape, strides, dtype they came with,
#: strides and dtype the plan wanted): a copy per call that a better plan would not make
#: (read by the suite runner's --profile)
ADOPTED_COPIES: collections.Counter[tuple] = collections.Counter()


_any_autocast = torch._C._is_any_autocast_enabled
_disable_autocast = torch._C._DisableAutocast


def call_without_autocast(call: Any, inputs: Sequence[Any]) -> Any:
    """A compiled graph's call with the caller's autocast off. Its casts are ops of the
    graph; under autocast the wrapper's library calls (``torch.bmm`` for a float32 matmul)
    would cast again and return another dtype than the buffer the kernels were specialized
    for: a Triton kernel reading a float32 buffer that holds bfloat16 reads past its end."""
    if not _any_autocast():
        return call(inputs)
    with _disable_autocast():
        return call(inputs)
