"""Which inputs of a call share a storage: part of every variant's key.

A variant is traced for one aliasing of its inputs: a function writing `w` while reading
`t1 = w[0]` (another input viewing w) must see the write through t1, and the trace only
knows that when the example inputs share storage too. A call whose inputs alias otherwise
than the traced ones (or where the traced ones did not) needs a variant of its own.
Computed on every call: one storage lookup per tensor input (~0.1 us), `None` when no two
share a storage (the common case).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

_Tensor = torch.Tensor
_strided = torch.strided


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
