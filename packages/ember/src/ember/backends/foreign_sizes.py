"""Graphs whose example inputs carry another tracer's symbolic sizes (torch.compile's Dynamo).

Our stages read symbolic sizes through ember-symbolic-shapes' `SymNode` and record the guards
they rely on in its `ShapeEnv`. A graph handed to our backend by Dynamo (interface 2, the
backend convention) has SymInts of PyTorch's own env instead: our stages cannot read them, and
a guard recorded in our env would be unknown to the caller's guards, so a compile made for
one size could run on another. Such a graph is compiled once per concrete size signature on
first use (size_specialization.py): correct for every size the caller's guards let through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ember_symbolic import is_ember_symbolic

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _foreign(value: Any) -> bool:
    return isinstance(value, _SYM) and not is_ember_symbolic(value)


def has_foreign_sizes(example_inputs: Sequence[Any]) -> bool:
    """Whether any input is, or has a size/stride/offset that is, a symbolic value whose node
    is not ember-symbolic-shapes'."""
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            # sparse layouts have no strides (the eager fallback takes those graphs later)
            layout = (
                (*value.stride(), value.storage_offset()) if value.layout is torch.strided else ()
            )
            if any(map(_foreign, (*value.shape, *layout))):
                return True
        elif _foreign(value):
            return True
    return False
