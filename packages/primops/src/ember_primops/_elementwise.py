"""The one meta rule shared by every elementwise prim (unary, binary, comparison, ternary)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ._checks import (
    broadcast_shapes,
    check_dtype,
    check_same_dtype,
    check_tensor,
    common_device,
    elementwise_strides,
)
from ._registry import fail

# How a prim's result dtype follows from its (common) input dtype.
OutDtype = Callable[[torch.dtype], torch.dtype]


def same_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype


def bool_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.bool


def real_of(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


def complex_of(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_complex()


def elementwise_meta(
    prim: str,
    tensors: Sequence[object],
    dtype_class: str,
    out_dtype: OutDtype = same_dtype,
    *,
    predicate: object = None,
) -> torch.Tensor:
    """Validate elementwise arguments and return an empty result with eager's layout.

    ``predicate`` (for ``where``) is a bool tensor that broadcasts with the others but is exempt
    from the same-dtype rule.
    """
    args = [check_tensor(prim, t, f"argument {i}") for i, t in enumerate(tensors)]
    dtype = check_same_dtype(prim, args)
    for t in args:
        check_dtype(prim, t, dtype_class)
    everything = list(args)
    if predicate is not None:
        pred = check_tensor(prim, predicate, "predicate")
        if pred.dtype != torch.bool:
            fail(prim, f"predicate must be a bool tensor, got {pred.dtype}", dtype=True)
        everything.insert(0, pred)
    shape = broadcast_shapes(prim, [t.shape for t in everything])
    device = common_device(prim, everything)
    strides = elementwise_strides(shape, everything)
    return torch.empty_strided(shape, strides, dtype=out_dtype(dtype), device=device)
