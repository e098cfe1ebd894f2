"""Tensor factories, copies and conversions: empty/zeros/full/arange/linspace/eye/_to_copy..."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import contiguous_strides, expand_to
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import _number_dtype, convert

aten = torch.ops.aten


def _device(device) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


def _dtype(dtype, fill=None) -> torch.dtype:
    if dtype is not None:
        return dtype
    return torch.get_default_dtype() if fill is None else _number_dtype(fill)


def _is_dense(a: torch.Tensor) -> bool:
    """Non-overlapping and dense: the strides are a permutation of contiguous strides."""
    dims = sorted((i for i in range(a.dim()) if a.shape[i] != 1), key=lambda i: a.stride(i))
    expected = 1
    for i in dims:
        if a.stride(i) != expected:
            return False
        expected *= a.shape[i]
    return True


def strides_for(
    shape: Sequence[int], memory_format=None, like: torch.Tensor | None = None
) -> list[int]:
    """Strides of a fresh tensor: contiguous, channels_last(_3d), or preserving ``like``'s."""
    shape = list(shape)
    if memory_format in (None, torch.preserve_format) and like is not None:
        if _is_dense(like):
            return list(like.stride())
        memory_format = like_suggested_format(like)
    if memory_format == torch.channels_last and len(shape) == 4:
        n, c, h, w = shape
        perm = contiguous_strides([n, h, w, c])
        return [perm[0], perm[3], perm[1], perm[2]]
    if memory_format == torch.channels_last_3d and len(shape) == 5:
        n, c, d, h, w = shape
        perm = contiguous_strides([n, d, h, w, c])
        return [perm[0], perm[4], perm[1], perm[2], perm[3]]
    return contiguous_strides(shape)


def like_suggested_format(a: torch.Tensor):
    if a.dim() == 4 and a.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if a.dim() == 5 and a.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return torch.contiguous_format


@register_decomposition(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape = list(size)
    strides = strides_for(shape, memory_format)
    return prims.empty_strided(shape, strides, dtype=_dtype(dtype), device=_device(device))


@register_decomposition(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return prims.empty_strided(
        list(size), list(stride), dtype=_dtype(dtype), device=_device(device)
    )


@register_decomposition(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    physical = [size[i] for i in physical_layout]
    physical_strides = contiguous_strides(physical)
    strides = [0] * len(size)
    for pos, dim in enumerate(physical_layout):
        strides[dim] = physical_strides[pos]
    return prims.empty_strided(list(size), strides, dtype=_dtype(dtype), device=_device(device))


@register_decomposition(aten.full.default)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return prims.full(
        list(size), fill_value, dtype=_dtype(dtype, fill_value), device=_device(device)
    )


@register_decomposition(aten.zeros.default)
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return prims.full(list(size), 0, dtype=_dtype(dtype), device=_device(device))


@register_decomposition(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return prims.full(list(size), 1, dtype=_dtype(dtype), device=_device(device))


@register_decomposition(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return prims.scalar_tensor(s, dtype=_dtype(dtype), device=_device(device))


def _like_kwargs(a: torch.Tensor, dtype, device):
    return (a.dtype if dtype is None else dtype), (a.device if device is None else device)


def _filled_like(a, value, dtype, device, memory_format):
    dtype, device = _like_kwargs(a, dtype, device)
    shape = list(a.shape)
    strides = strides_for(shape, memory_format, a)
    if strides == contiguous_strides(shape):
        return prims.full(shape, value, dtype=dtype, device=torch.device(device))
    fresh = prims.empty_strided(shape, strides, dtype=dtype, device=torch.device(device))
    # `fill` keeps the layout of `fresh` (elementwise prims follow their inputs' layout).
    return prims.where(
        prims.scalar_tensor(True, dtype=torch.bool, device=fresh.device),
        expand_to(prims.scalar_tensor(value, dtype=dtype, device=fresh.device), shape),
        fresh,
    )


@register_decomposition(aten.full_like.default)
def full_like(
    a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    return _filled_like(a, fill_value, dtype, device, memory_format)


@register_decomposition(aten.zeros_like.default)
def zeros_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _filled_like(a, 0, dtype, device, memory_format)


@register_decomposition(aten.ones_like.default)
def ones_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _filled_like(a, 1, dtype, device, memory_format)


@register_decomposition(aten.empty_like.default)
def empty_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype, device = _like_kwargs(a, dtype, device)
    strides = strides_for(list(a.shape), memory_format, a)
    return prims.empty_strided(list(a.shape), strides, dtype=dtype, device=torch.device(device))


@register_decomposition(aten.new_empty.default)
def new_empty(a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, device = _like_kwargs(a, dtype, device)
    return prims.empty_strided(
        list(size), contiguous_strides(size), dtype=dtype, device=torch.device(device)
    )


@register_decomposition(aten.new_empty_strided.default)
def new_empty_strided(a, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype, device = _like_kwargs(a, dtype, device)
    return prims.empty_strided(list(size), list(stride), dtype=dtype, device=torch.device(device))


def _new_filled(a, size, value, dtype, device):
    dtype, device = _like_kwargs(a, dtype, device)
    return prims.full(list(size), value, dtype=dtype, device=torch.device(device))


@register_decomposition(aten.new_full.default)
def new_full(a, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _new_filled(a, size, fill_value, dtype, device)


@register_decomposition(aten.new_zeros.default)
def new_zeros(a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _new_filled(a, size, 0, dtype, device)


@register_decomposition(aten.new_ones.default)
def new_ones(a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _new_filled(a, size, 1, dtype, device)


@register_decomposition(aten.fill.Scalar, aten.fill.Tensor)
def fill(a, value):
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.dim()} dimensions."
            )
        return prims.clone(expand_to(convert(value, a.dtype), list(a.shape)))
    return _filled_like(a, value, None, None, None)


@register_decomposition(aten.zero.default)
def zero(a):
    return _filled_like(a, 0, None, None, None)


@register_decomposition(aten.clone.default)
def clone(a, *, memory_format=None):
    return prims.clone(a, memory_format=memory_format)


@register_decomposition(aten._to_copy.default)
def to_copy(
    a,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    non_blocking=False,
    memory_format=None,
):
    out = a
    if device is not None and torch.device(device) != a.device:
        out = prims.device_put(out, torch.device(device))
    if dtype is not None and dtype != a.dtype:
        out = prims.convert_element_type(out, dtype)
    if out is a or memory_format not in (None, torch.preserve_format):
        out = prims.clone(out, memory_format=memory_format)
    return out


@register_decomposition(aten.copy.default)
def copy(a, src, non_blocking=False):
    if not isinstance(src, torch.Tensor):  # `t.copy_(1)`: eager copies a wrapped number
        return fill(a, src)
    value = src
    if value.device != a.device:
        value = prims.device_put(value, a.device)
    value = expand_to(convert(value, a.dtype), list(a.shape))
    return prims.clone(value)


def _range_dtype(dtype, *values) -> torch.dtype:
    if dtype is not None:
        return dtype
    if any(isinstance(v, float) for v in values):
        return torch.get_default_dtype()
    return torch.int64


def _number(x):
    return x.item() if isinstance(x, torch.Tensor) else x


@register_decomposition(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    values = [_number(v) for v in args]
    start, end, step = {1: (0, values[0], 1), 2: (*values, 1), 3: tuple(values)}[len(values)]
    out_dtype = _range_dtype(dtype, start, end, step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if out_dtype.is_floating_point or any(isinstance(v, float) for v in (start, end, step)):
        length = max(math.ceil((end - start) / step), 0)
    else:
        length = max(-((start - end) // step) if step > 0 else -((end - start) // -step), 0)
    device = _device(device)
    if all(isinstance(v, int) for v in (start, step)) and not out_dtype.is_floating_point:
        return prims.iota(length, start=start, step=step, dtype=out_dtype, device=device)
    index = prims.iota(length, start=0, step=1, dtype=torch.float64, device=device)
    f64 = torch.float64
    value = prims.add(
        prims.mul(index, prims.scalar_tensor(float(step), dtype=f64, device=device)),
        prims.scalar_tensor(float(start), dtype=f64, device=device),
    )
    return prims.convert_element_type(value, out_dtype)


def _linspace_f64(start, end, steps: int, device) -> torch.Tensor:
    f64 = torch.float64
    index = prims.iota(steps, start=0, step=1, dtype=f64, device=device)
    if steps == 1:
        return prims.full([1], float(start), dtype=f64, device=device)
    step = (end - start) / (steps - 1)
    # Like eager: count up from start for the first half and down from end for the second.
    from_start = prims.add(
        prims.mul(index, prims.scalar_tensor(step, dtype=f64, device=device)),
        prims.scalar_tensor(float(start), dtype=f64, device=device),
    )
    reversed_index = prims.sub(prims.scalar_tensor(steps - 1, dtype=f64, device=device), index)
    from_end = prims.sub(
        prims.scalar_tensor(float(end), dtype=f64, device=device),
        prims.mul(reversed_index, prims.scalar_tensor(step, dtype=f64, device=device)),
    )
    first_half = prims.lt(index, prims.scalar_tensor(steps // 2, dtype=f64, device=device))
    return prims.where(first_half, from_start, from_end)


_LINSPACE = [
    aten.linspace.default,
    aten.linspace.Tensor_Tensor,
    aten.linspace.Tensor_Scalar,
    aten.linspace.Scalar_Tensor,
]
_LOGSPACE = [
    aten.logspace.default,
    aten.logspace.Tensor_Tensor,
    aten.logspace.Tensor_Scalar,
    aten.logspace.Scalar_Tensor,
]


@register_decomposition(*_LINSPACE)
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    start, end = _number(start), _number(end)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    out_dtype = _dtype(dtype)
    value = _linspace_f64(start, end, steps, _device(device))
    if not out_dtype.is_floating_point:
        value = prims.trunc(value)
    return prims.convert_element_type(value, out_dtype)


@register_decomposition(*_LOGSPACE)
def logspace(
    start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None
):
    start, end = _number(start), _number(end)
    out_dtype = _dtype(dtype)
    device = _device(device)
    exponent = _linspace_f64(start, end, steps, device)
    if not out_dtype.is_floating_point:
        exponent = prims.trunc(exponent)
    value = prims.pow(
        prims.scalar_tensor(float(base), dtype=torch.float64, device=device), exponent
    )
    return prims.convert_element_type(value, out_dtype)


@register_decomposition(aten.eye.default, aten.eye.m)
def eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    m = n if m is None else m
    device = _device(device)
    rows = prims.broadcast_in_dim(
        prims.iota(n, start=0, step=1, dtype=torch.int64, device=device), [n, m], [0]
    )
    cols = prims.broadcast_in_dim(
        prims.iota(m, start=0, step=1, dtype=torch.int64, device=device), [n, m], [1]
    )
    return prims.convert_element_type(prims.eq(rows, cols), _dtype(dtype))
