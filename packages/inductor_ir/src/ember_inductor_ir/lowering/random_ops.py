"""Lowerings of the random prims onto ``ops.random_bits`` (the counter hash).

The float conversions repeat ember_primops.random step by step, so kernels reproduce the
reference bit for bit: uniform = (bits >> (32 - m)) * 2**-m; normal = Box-Muller on two
streams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..indexing import multi_to_flat
from ..nodes import Pointwise, TensorBox
from .registry import register_lowering

MANTISSA_BITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 32}


def _bits(ops: Any, seed: Any, shape: Sequence[Any], index: Any, offset: int, stream: int) -> Any:
    counter = ops.index_expr(multi_to_flat(index, shape) + offset, torch.int64)
    return ops.random_bits(seed, counter, stream)


def _top_bits_as_unit(ops: Any, bits: Any, k: int, plus_one: bool, compute: torch.dtype) -> Any:
    top = ops.shift_right(bits, ops.constant(32 - k, torch.int64))
    if plus_one:
        top = ops.add(top, ops.constant(1, torch.int64))
    unit = ops.mul(ops.to_dtype(top, torch.float64), ops.constant(2.0**-k, torch.float64))
    return ops.to_dtype(unit, compute)


@register_lowering("uniform")
def lower_uniform(
    ctx: Any, shape: Sequence[int], seed: TensorBox, offset: int, *, dtype: torch.dtype, device: Any
) -> TensorBox:
    load_seed = seed.make_loader()
    m = MANTISSA_BITS[dtype]

    def inner_fn(ops: Any, index: Any) -> Any:
        bits = _bits(ops, load_seed(ops, []), shape, index, offset, 0)
        return _top_bits_as_unit(ops, bits, m, False, dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, list(shape)))


@register_lowering("normal")
def lower_normal(
    ctx: Any, shape: Sequence[int], seed: TensorBox, offset: int, *, dtype: torch.dtype, device: Any
) -> TensorBox:
    load_seed = seed.make_loader()
    compute, k = (torch.float64, 32) if dtype == torch.float64 else (torch.float32, 24)

    def inner_fn(ops: Any, index: Any) -> Any:
        s = load_seed(ops, [])
        u1 = _top_bits_as_unit(ops, _bits(ops, s, shape, index, offset, 1), k, True, compute)
        u2 = _top_bits_as_unit(ops, _bits(ops, s, shape, index, offset, 2), k, False, compute)
        radius = ops.sqrt(ops.mul(ops.constant(-2.0, compute), ops.log(u1)))
        angle = ops.mul(ops.constant(2.0 * math.pi, compute), u2)
        return ops.to_dtype(ops.mul(radius, ops.cos(angle)), dtype)

    return TensorBox(Pointwise(torch.device(device), dtype, inner_fn, list(shape)))


@register_lowering("random_bits")
def lower_random_bits(
    ctx: Any, shape: Sequence[int], seed: TensorBox, offset: int, *, device: Any
) -> TensorBox:
    load_seed = seed.make_loader()

    def inner_fn(ops: Any, index: Any) -> Any:
        return _bits(ops, load_seed(ops, []), shape, index, offset, 0)

    return TensorBox(Pointwise(torch.device(device), torch.int64, inner_fn, list(shape)))
