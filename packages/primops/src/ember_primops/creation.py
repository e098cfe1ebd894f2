"""Creation prims: tensors made from shapes and scalars (no tensor inputs)."""

from __future__ import annotations

import torch

from ._checks import check_int_list, contiguous_strides
from ._registry import define_prim, fail


def _full_meta(shape, fill_value, *, dtype, device):
    check_int_list("full", shape, "shape")
    return torch.empty_strided(shape, contiguous_strides(shape), dtype=dtype, device=device)


define_prim(
    "full(SymInt[] shape, Scalar fill_value, *, ScalarType dtype, Device device) -> Tensor",
    "creation",
    _full_meta,
    lambda shape, fill_value, *, dtype, device: torch.full(
        shape, fill_value, dtype=dtype, device=device
    ),
    notes="contiguous",
    eager=lambda shape, fill_value, *, dtype, device: torch.full(
        shape, fill_value, dtype=dtype, device=device
    ),
    check_reference=False,
)


def _empty_strided_meta(shape, stride, *, dtype, device):
    check_int_list("empty_strided", shape, "shape")
    if len(shape) != len(stride):
        fail("empty_strided", f"shape {list(shape)} and stride {list(stride)} differ in length")
    check_int_list("empty_strided", stride, "stride")
    return torch.empty_strided(shape, stride, dtype=dtype, device=device)


define_prim(
    "empty_strided(SymInt[] shape, SymInt[] stride, *, ScalarType dtype, Device device) -> Tensor",
    "creation",
    _empty_strided_meta,
    _empty_strided_meta,
    notes="uninitialized",
    check_reference=False,
)


def _empty_permuted_meta(shape, physical_layout, *, dtype, device):
    check_int_list("empty_permuted", shape, "shape")
    if sorted(physical_layout) != list(range(len(shape))):
        fail("empty_permuted", f"physical_layout {list(physical_layout)} is not a permutation")
    return torch.empty_permuted(shape, physical_layout, dtype=dtype, device=device)


define_prim(
    "empty_permuted(SymInt[] shape, int[] physical_layout, *, ScalarType dtype, Device device)"
    " -> Tensor",
    "creation",
    _empty_permuted_meta,
    _empty_permuted_meta,
    notes="uninitialized; dims laid out outermost-first in physical_layout order",
    check_reference=False,
)


def _iota_meta(length, *, start, step, dtype, device):
    if length < 0:
        fail("iota", f"length must be >= 0, got {length}")
    if dtype == torch.bool or dtype.is_complex:
        fail("iota", f"dtype must be integer or floating, got {dtype}", dtype=True)
    return torch.empty_strided([length], [1], dtype=dtype, device=device)


def _iota(length, *, start, step, dtype, device):
    _iota_meta(length, start=start, step=step, dtype=dtype, device=device)
    ramp = torch.arange(length, dtype=torch.int64, device=device)
    return (ramp * step + start).to(dtype)


define_prim(
    "iota(SymInt length, *, int start, int step, ScalarType dtype, Device device) -> Tensor",
    "creation",
    _iota_meta,
    _iota,
    notes="start + step * i for i in range(length), computed in int64 then cast",
    eager=lambda length, *, start, step, dtype, device: torch.arange(
        start, start + step * length, step, dtype=torch.int64, device=device
    ).to(dtype),
    check_reference=False,
)


def _scalar_tensor_meta(s, *, dtype, device):
    return torch.empty((), dtype=dtype, device=device)


define_prim(
    "scalar_tensor(Scalar s, *, ScalarType dtype, Device device) -> Tensor",
    "creation",
    _scalar_tensor_meta,
    lambda s, *, dtype, device: torch.scalar_tensor(s, dtype=dtype, device=device),
    notes="0-dim",
    eager=lambda s, *, dtype, device: torch.tensor(s, dtype=dtype, device=device),
    check_reference=False,
)
