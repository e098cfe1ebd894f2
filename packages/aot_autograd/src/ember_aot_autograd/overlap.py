"""Whether an in-place op reads memory it also writes (other than the same view).

Eager's in-place and out= kernels refuse a written tensor that overlaps itself (an expanded
tensor) or partially overlaps one of the op's inputs (`x.add_(x[0])`); where it cannot tell,
the result depends on the order the kernel visits elements. The functional form reads every
input before writing, so it would compute something else, or succeed where eager raises.
Such a write is refused (the graph runs eagerly and gets eager's error or result). The
check is exact where cheap: views are compared by their element addresses.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ember_aot_autograd.dense import is_dense
from ember_aot_autograd.tensor_table import storage_key

#: above this many elements, overlapping spans count as shared memory (no address sets)
EXACT_LIMIT = 1 << 20


def _static(tensor: torch.Tensor) -> bool:
    values = [tensor.storage_offset(), *tensor.shape, *tensor.stride()]
    return all(type(v) is int for v in values)


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    first = tensor.storage_offset()
    return first, first + sum(
        (n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True)
    )


def _addresses(tensor: torch.Tensor) -> torch.Tensor:
    """The storage elements `tensor` reads, computed on real CPU integers (outside the
    trace's fake and recording modes)."""
    with _disable_current_modes():
        index = torch.arange(_span(tensor)[1] + 1)
        return index.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).reshape(-1)


def overlaps_itself(tensor: torch.Tensor) -> bool:
    """An expanded (stride 0) or otherwise self-overlapping written tensor."""
    pairs = list(zip(tensor.shape, tensor.stride(), strict=True))
    if any(type(s) is int and s == 0 and not (type(n) is int and n <= 1) for n, s in pairs):
        return True
    if not _static(tensor) or tensor.numel() > EXACT_LIMIT or is_dense(tensor):
        return False  # views made by slicing or permuting never overlap themselves
    with _disable_current_modes():
        addresses = _addresses(tensor)
        return addresses.unique().numel() != addresses.numel()


def shares_memory(written: torch.Tensor, read: torch.Tensor) -> bool:
    """Whether `read` shares an element with `written`, short of being the same view."""
    if storage_key(written) != storage_key(read) or written.numel() == 0 or read.numel() == 0:
        return False
    if not (_static(written) and _static(read)):
        return True  # symbolic layouts: assume the worst
    same_view = (
        written.storage_offset() == read.storage_offset()
        and tuple(written.shape) == tuple(read.shape)
        and tuple(written.stride()) == tuple(read.stride())
    )
    if same_view:
        return False
    (a0, a1), (b0, b1) = _span(written), _span(read)
    if a1 < b0 or b1 < a0:
        return False
    if written.numel() + read.numel() > EXACT_LIMIT:
        return True
    with _disable_current_modes():
        return bool(torch.isin(_addresses(written), _addresses(read)).any())
