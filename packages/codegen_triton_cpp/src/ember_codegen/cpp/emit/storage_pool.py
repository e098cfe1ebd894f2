"""A storage pool for the buffers of generated CPU wrappers (C++ target only: GPU memory
comes from torch's caching allocator)."""

from __future__ import annotations

import os

import torch


def size_class(numel: int) -> int:
    """The storage size a pooled buffer of ``numel`` elements is allocated with: ``numel``
    rounded up to 4 significant bits (at most 1/8 more), so that the calls of a symbolic
    graph at lengths 40, 41, 42... share buffers instead of each length allocating anew."""
    shift = max(numel.bit_length() - 4, 0)
    return -(-numel >> shift) << shift


def _class_below(capacity: int) -> int:
    """The largest size class a storage of ``capacity`` elements can serve."""
    shift = max(capacity.bit_length() - 4, 0)
    return capacity >> shift << shift


class StoragePool:
    """Dead buffers of generated CPU wrappers, kept for the next allocation of the same dtype
    and size class (the graph's next call, or another graph's).

    A buffer allocated anew on every call is memory the C allocator maps (or takes back from
    the OS after trimming its heap) and the kernel touches first: page faults, 8% of a
    transformer block's inference on the 2-core development machine. A buffer taken from
    here is already mapped. Buffers are allocated in size classes (``size_class``) and filed
    by the class their storage can serve, so a graph of symbolic sizes called at a new
    length reuses the last length's buffers. Concurrent calls are safe: a buffer is popped by
    one taker. At most ``limit_bytes`` are held; past it the pool is emptied (sizes no graph
    asks for any more do not pin memory forever)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self._free: dict[tuple[torch.dtype, int], list[tuple[torch.Tensor, int]]] = {}

    def take(
        self, size: tuple, stride: tuple, offset: int, dtype: torch.dtype, numel: int
    ) -> torch.Tensor:
        wanted = size_class(numel)
        stack = self._free.get((dtype, wanted))
        if stack:
            try:
                found, nbytes = stack.pop()
            except IndexError:  # another thread took the last one
                found = None
            if found is not None:
                self.held_bytes -= nbytes
                return found.as_strided(size, stride, offset)
        return torch.empty(wanted, dtype=dtype).as_strided(size, stride, offset)

    def give(self, buffer: torch.Tensor, dtype: torch.dtype, numel: int) -> None:
        nbytes = buffer.untyped_storage().nbytes()  # its real capacity (extern outputs too)
        if nbytes > self.limit_bytes or buffer.dtype is not dtype:
            return  # larger than the whole budget (or pooling is off)
        if self.held_bytes + nbytes > self.limit_bytes:
            self.clear()
        key = (dtype, _class_below(nbytes // buffer.element_size()))
        self._free.setdefault(key, []).append((buffer, nbytes))
        self.held_bytes += nbytes

    def clear(self) -> None:
        self._free = {}
        self.held_bytes = 0


#: EMBER_CPU_POOL_MB (default 2048) bounds the bytes held between calls; 0 disables pooling.
def _pool_megabytes() -> int:
    value = os.environ.get("EMBER_CPU_POOL_MB", "2048")
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(
            f"EMBER_CPU_POOL_MB={value!r} is not a whole number of megabytes: set one or unset it"
        ) from None


STORAGE_POOL = StoragePool(_pool_megabytes() << 20)
