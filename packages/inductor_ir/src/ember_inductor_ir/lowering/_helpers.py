"""Shared pieces of the lowerings: broadcasting loaders and building Pointwise boxes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from ..errors import LoweringError
from ..indexing import Expr
from ..nodes import IRNode, Loader, Pointwise, TensorBox


def broadcast_shapes(*shapes: Sequence[Expr]) -> list[Expr]:
    rank = max((len(s) for s in shapes), default=0)
    out: list[Expr] = [sympy.Integer(1)] * rank
    for shape in shapes:
        for k, dim in enumerate(shape):
            pos = rank - len(shape) + k
            if dim == 1:
                continue
            if out[pos] not in (1, dim):
                raise LoweringError(f"shapes {[list(s) for s in shapes]} do not broadcast")
            out[pos] = dim
    return out


def broadcast_loader(value: IRNode, out_shape: Sequence[Expr]) -> Loader:
    """Read ``value`` at an index of the broadcast ``out_shape`` (numpy alignment)."""
    size = value.get_size()
    lead = len(out_shape) - len(size)
    inner = value.make_loader()

    def load(ops: Any, index: Sequence[Expr]) -> Any:
        mapped = [sympy.Integer(0) if size[k] == 1 else index[lead + k] for k in range(len(size))]
        return inner(ops, mapped)

    return load


def output_device(values: Sequence[IRNode]) -> torch.device:
    """The device of an elementwise result: 0-dim CPU tensors may ride along with others."""
    devices = [v.get_device() for v in values]
    for value, device in zip(values, devices, strict=False):
        if not (device.type == "cpu" and len(value.get_size()) == 0):
            return device
    return devices[0]


def pointwise(
    values: Sequence[IRNode],
    combine: Callable[..., Any],
    dtype: torch.dtype,
    shape: Sequence[Expr] | None = None,
) -> TensorBox:
    """Broadcast ``values`` and combine their elements with ``combine(ops, *elements)``."""
    out_shape = (
        list(shape) if shape is not None else broadcast_shapes(*[v.get_size() for v in values])
    )
    loaders = [broadcast_loader(v, out_shape) for v in values]

    def inner_fn(ops: Any, index: Sequence[Expr]) -> Any:
        return combine(ops, *[load(ops, index) for load in loaders])

    device = output_device(values) if values else torch.device("cpu")
    return TensorBox(Pointwise(device, dtype, inner_fn, out_shape))


def normalize_dims(dims: Sequence[int], rank: int) -> list[int]:
    return sorted({d % rank if rank else 0 for d in dims})


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex
