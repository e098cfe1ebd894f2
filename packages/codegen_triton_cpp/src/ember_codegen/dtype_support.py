"""Which torch dtypes a target computes with, asked the same way of either target: the
target's table of types looked up, with one error naming what is supported and what to do.
Target-neutral: imports neither emitter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import torch

from ember_codegen.exc import CodegenError

T = TypeVar("T")


class UnsupportedDtypeError(CodegenError):
    """A dtype a target cannot compute with (complex, float8, wide unsigned...)."""


def target_type(table: Mapping[torch.dtype, T], dtype: torch.dtype, target: str) -> T:
    """``table[dtype]``, or UnsupportedDtypeError saying that ``target`` has no kernels for
    ``dtype`` and which dtypes it has."""
    try:
        return table[dtype]
    except KeyError:
        raise UnsupportedDtypeError(
            f"the {target} target has no kernels for {dtype}; supported: "
            f"{', '.join(str(d).removeprefix('torch.') for d in table)}. Keep ops on this "
            "dtype out of the compiled region (or use the eager/aot_eager backend)"
        ) from None


def is_integer(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
