"""Conversion prims: dtype conversion, device transfer and bit reinterpretation."""

from __future__ import annotations

import torch

from ._checks import check_tensor, empty_like_layout
from ._registry import define_prim, fail


def _convert_meta(a, dtype):
    check_tensor("convert_element_type", a)
    return empty_like_layout(a, dtype=dtype)


def _convert(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = empty_like_layout(a, dtype=dtype)
    out.copy_(a)
    return out


define_prim(
    "convert_element_type(Tensor a, ScalarType dtype) -> Tensor",
    "conversion",
    _convert_meta,
    _convert,
    notes="fresh tensor (even for the same dtype); keeps a dense layout; casts like Tensor.to",
    eager=lambda a, dtype: a.to(dtype),
)


def _target_device(a: torch.Tensor, device: torch.device) -> torch.device:
    # A meta input stays meta (this is the Meta-key path; under FakeTensorMode a is a FakeTensor).
    return torch.device("meta") if a.device.type == "meta" else torch.device(device)


def _device_put_meta(a, device):
    check_tensor("device_put", a)
    return empty_like_layout(a, device=_target_device(a, device))


def _device_put(a: torch.Tensor, device: torch.device) -> torch.Tensor:
    out = empty_like_layout(a, device=torch.device(device))
    out.copy_(a)
    return out


define_prim(
    "device_put(Tensor a, Device device) -> Tensor",
    "conversion",
    _device_put_meta,
    _device_put,
    notes="fresh copy on `device`, same dtype and layout",
    eager=lambda a, device: a.to(device),
)


def _view_element_type(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    check_tensor("view_element_type", a)
    old, new = a.element_size(), torch.empty((), dtype=dtype, device="meta").element_size()
    if old != new:
        if a.ndim == 0 or a.stride(-1) != 1:
            fail(
                "view_element_type",
                f"{a.dtype} -> {dtype} changes the element size; that needs a last dim of stride 1",
                dtype=True,
            )
        if (a.shape[-1] * old) % new:
            fail(
                "view_element_type",
                f"last dim of size {a.shape[-1]} ({a.dtype}) cannot be viewed as {dtype}",
                dtype=True,
            )
    return a.view(dtype)


define_prim(
    "view_element_type(Tensor(a) a, ScalarType dtype) -> Tensor(a)",
    "conversion",
    _view_element_type,
    _view_element_type,
    tags=("views",),
    notes="bit reinterpretation (a view); sizes differ -> last dim rescaled",
    eager=lambda a, dtype: a.view(dtype),
    check_reference=False,
)
