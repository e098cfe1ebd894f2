"""Lowerings of the conversion prims."""

from __future__ import annotations

from typing import Any

import torch

from ..nodes import TensorBox
from ._helpers import pointwise
from .registry import register_lowering


@register_lowering("convert_element_type")
def lower_convert_element_type(ctx: Any, a: TensorBox, dtype: torch.dtype) -> TensorBox:
    return pointwise([a], lambda ops, x: ops.to_dtype(x, dtype), dtype)


@register_lowering("device_put")
def lower_device_put(ctx: Any, a: TensorBox, device: Any) -> Any:
    if torch.device(device) == a.get_device():
        return pointwise([a], lambda ops, x: x, a.get_dtype())
    # A copy between devices is a library call, not a loop.
    return ctx.extern(ctx.current_node.target, [a, device])
