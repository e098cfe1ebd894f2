"""Which inputs of a call share a storage: part of every variant's key.

A variant is traced for one aliasing of its inputs: a function writing `w` while reading
`t1 = w[0]` (another input viewing w) must see the write through t1, and the trace only
knows that when the example inputs share storage too. A call whose inputs alias otherwise
than the traced ones (or where the traced ones did not) needs a variant of its own.
Computed on every call: one storage lookup per tensor input (~0.1 us), `None` when no two
share a storage (the common case).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

_Tensor = torch.Tensor
_strided = torch.strided
# a tensor's StorageImpl address, without a Python storage object (half the time of
# `t.untyped_storage()._cdata`, which it equals)
_storage_id = getattr(torch._C, "_storage_id", lambda t: t.untyped_storage()._cdata)

#: an identity of a tensor's storage (equal for every view of one storage), a C call
storage_id = _storage_id


def alias_pattern(args: Sequence[Any]) -> tuple[tuple[int, int], ...] | None:
    """(input, first input with its storage) for each tensor input sharing the storage of
    an earlier one; None when every tensor input has a storage of its own."""
    first: dict[int, int] = {}
    shared = None
    for index, value in enumerate(args):
        if isinstance(value, _Tensor) and value.layout is _strided:
            owner = first.setdefault(value.untyped_storage()._cdata, index)
            if owner != index:
                shared = (*(shared or ()), (index, owner))
    return shared


class SharingCheck:
    """`check(args)`: whether `alias_pattern(args) == expected`, for calls whose tensor
    inputs sit where the example's did (a caller under the tracer's guards, which pin each
    input's type). The common case, no two inputs sharing a storage, is one storage lookup
    per tensor and a set: an optimizer step passes ~800 tensors on every call."""

    def __init__(self, example_args: Sequence[Any], expected: Any) -> None:
        self.expected = expected
        self.positions = tuple(
            i
            for i, value in enumerate(example_args)
            if isinstance(value, _Tensor) and value.layout is _strided
        )
        fast = expected is None and len(self.positions) >= 2
        self._pick = operator.itemgetter(*self.positions) if fast else None

    def __call__(self, args: Sequence[Any]) -> bool:
        if self._pick is not None:
            try:
                distinct = set(map(_storage_id, self._pick(args)))
            except (TypeError, RuntimeError, NotImplementedError, IndexError):
                return alias_pattern(args) == self.expected  # not the guarded kinds
            return len(distinct) == len(self.positions)
        return alias_pattern(args) == self.expected
