"""Lowerings of the creation prims: constants and ramps computed inside the kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..nodes import Pointwise, TensorBox
from .registry import register_lowering


def _filled(shape: Sequence[Any], value: Any, dtype: torch.dtype, device: Any) -> TensorBox:
    def inner_fn(ops: Any, index: Any) -> Any:
        return ops.constant(value, dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, list(shape)))


@register_lowering("full")
def lower_full(
    ctx: Any, shape: Sequence[int], fill_value: Any, *, dtype: torch.dtype, device: Any
) -> TensorBox:
    return _filled(shape, fill_value, dtype, device)


@register_lowering("scalar_tensor")
def lower_scalar_tensor(ctx: Any, s: Any, *, dtype: torch.dtype, device: Any) -> TensorBox:
    return _filled([], s, dtype, device)


@register_lowering("empty_strided", "empty_permuted")
def lower_empty(ctx: Any, shape: Sequence[int], _layout: Any, *, dtype: torch.dtype, device: Any):
    # Uninitialized memory by contract: any value is correct; zeros keep runs reproducible.
    return _filled(shape, False if dtype == torch.bool else 0, dtype, device)


@register_lowering("iota")
def lower_iota(
    ctx: Any, length: int, *, start: int, step: int, dtype: torch.dtype, device: Any
) -> TensorBox:
    def inner_fn(ops: Any, index: Any) -> Any:
        # Like the prim: computed in int64, then converted.
        return ops.to_dtype(ops.index_expr(index[0] * step + start, torch.int64), dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, [length]))
