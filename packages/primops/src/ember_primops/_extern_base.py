"""Helpers for extern prims: check the arguments, then let the aten kernel decide the metadata.

An extern prim's meta function calls the same aten op as its reference, on the meta/fake inputs it
was given (aten's meta kernels compute shapes and dtypes). The result layout is our own rule, not
aten's (aten's meta and fake paths disagree for LAPACK and convolution kernels): contiguous, or
what the prim's ``layout`` function says (convolution keeps channels_last).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ._checks import check_dtype, check_same_dtype, check_tensor
from ._registry import define_prim, fail


def as_tuple(out: object) -> object:
    return tuple(out) if isinstance(out, (tuple, list)) else out


def check_matrices(
    p: str,
    tensors: Sequence[object],
    *,
    square: Sequence[int] = (),
    dtype_class: str = "float_complex",
) -> None:
    """Tensor arguments share a float/complex dtype and have >= 2 dims; ``square`` ones are square."""
    ts = [check_tensor(p, t, f"argument {i}") for i, t in enumerate(tensors)]
    check_same_dtype(p, ts)
    for i, t in enumerate(ts):
        check_dtype(p, t, dtype_class, f"argument {i}")
        if t.ndim < 2:
            fail(p, f"argument {i} must have at least 2 dims, got shape {list(t.shape)}")
    for i in square:
        if ts[i].shape[-1] != ts[i].shape[-2]:
            fail(p, f"argument {i} must be a (batch of) square matrices, got {list(ts[i].shape)}")


def contiguous_layout(*args: object) -> torch.memory_format:
    return torch.contiguous_format


def _fresh(t: object, memory_format: torch.memory_format) -> object:
    if not isinstance(t, torch.Tensor):
        return t
    if memory_format != torch.contiguous_format and t.ndim not in (4, 5):
        memory_format = torch.contiguous_format
    return torch.empty(t.shape, dtype=t.dtype, device=t.device, memory_format=memory_format)


def define_extern(
    schema: str,
    kernel: Callable,
    check: Callable[..., None],
    *,
    notes: str,
    eager: Callable | None = None,
    meta_kernel: Callable | None = None,
    layout: Callable[..., torch.memory_format] = contiguous_layout,
) -> None:
    """``check(*args)`` validates; ``kernel(*args)`` is the aten call (reference, and meta unless
    ``meta_kernel`` is given, for kernels without an aten meta function)."""

    def meta(*args, **kwargs):
        check(*args, **kwargs)
        out = as_tuple((meta_kernel or kernel)(*args, **kwargs))
        memory_format = layout(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_fresh(o, memory_format) for o in out)
        return _fresh(out, memory_format)

    def reference(*args, **kwargs):
        return as_tuple(kernel(*args, **kwargs))

    define_prim(schema, "extern", meta, reference, notes=notes, eager=eager or kernel)
