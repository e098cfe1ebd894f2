"""Reduction prims: ``int[] dims`` are removed from the result (no keepdim).

An empty ``dims`` list reduces nothing (unlike aten, where it means "all dims"). Results are
contiguous; the output dtype is the input dtype (argmax/argmin: int64; any/all: bool; var of a
complex tensor: its real dtype).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._checks import canonical_dim, canonical_dims, check_dtype, check_tensor, empty_contiguous
from ._elementwise import real_of
from ._registry import define_prim, fail


def reduced_shape(prim: str, a: torch.Tensor, dims) -> list[int]:
    dims = (
        canonical_dims(prim, dims, a.ndim) if a.ndim else [canonical_dim(prim, d, 0) for d in dims]
    )
    return [n for d, n in enumerate(a.shape) if d not in dims]


def _reduction_meta(name: str, dtype_class: str, out_dtype: Callable, identity: bool):
    def meta(a, dims):
        check_tensor(name, a)
        check_dtype(name, a, dtype_class)
        shape = reduced_shape(name, a, dims)
        if not identity and a.numel() == 0 and any(a.shape[d] == 0 for d in dims):
            fail(name, f"cannot reduce an empty dim of shape {list(a.shape)}: no identity")
        return empty_contiguous(shape, out_dtype(a.dtype), a.device)

    return meta


def _over(fn: Callable) -> Callable:
    """Apply an aten reduction with our dims convention (empty dims: reduce nothing)."""

    def reduce(a, dims):
        if not dims:
            return fn(a.unsqueeze(-1), [-1])
        return fn(a, list(dims))

    return reduce


def _xor_reduce(a: torch.Tensor, dims) -> torch.Tensor:
    keep = [d for d in range(a.ndim) if d not in {x % max(a.ndim, 1) for x in dims}]
    moved = a.permute(keep + [d for d in range(a.ndim) if d not in keep]) if a.ndim else a
    flat = moved.reshape([a.shape[d] for d in keep] + [-1])
    # Pairwise tree: xor the even and odd halves until one element is left.
    while flat.shape[-1] > 1:
        if flat.shape[-1] % 2:
            flat = torch.cat([flat, torch.zeros_like(flat[..., :1])], -1)
        flat = flat[..., 0::2] ^ flat[..., 1::2]
    if flat.shape[-1] == 0:
        return torch.zeros(flat.shape[:-1], dtype=a.dtype, device=a.device)
    return flat[..., 0].clone()


_SAME = lambda dtype: dtype  # noqa: E731
_BOOL = lambda dtype: torch.bool  # noqa: E731

# name -> (reference on (a, dims), dtype class, result dtype, has an identity, eager op, notes)
_REDUCTIONS = {
    "sum": (
        _over(lambda a, d: torch.sum(a, d, dtype=a.dtype)),
        "number",
        _SAME,
        True,
        lambda a, d: torch.sum(a, d) if d else a,
        "integers wrap in the input dtype",
    ),
    "prod": (
        _over(lambda a, d: _prod(a, d)),
        "number",
        _SAME,
        True,
        lambda a, d: _prod(a, d) if d else a,
        "integers wrap in the input dtype",
    ),
    "amax": (
        _over(torch.amax),
        "real_bool",
        _SAME,
        False,
        lambda a, d: torch.amax(a, d) if d else a,
        "propagates NaN",
    ),
    "amin": (
        _over(torch.amin),
        "real_bool",
        _SAME,
        False,
        lambda a, d: torch.amin(a, d) if d else a,
        "propagates NaN",
    ),
    "any": (
        _over(lambda a, d: torch.any(a, tuple(d))),
        "any",
        _BOOL,
        True,
        lambda a, d: torch.any(a, tuple(d)) if d else a != 0,
        "-> bool",
    ),
    "all": (
        _over(lambda a, d: torch.all(a, tuple(d))),
        "any",
        _BOOL,
        True,
        lambda a, d: torch.all(a, tuple(d)) if d else a != 0,
        "-> bool",
    ),
    "xor_sum": (_xor_reduce, "integer", _SAME, True, None, "bitwise xor of the elements"),
}


def _prod(a: torch.Tensor, dims) -> torch.Tensor:
    # aten prod takes one dim at a time.
    for d in sorted((x % a.ndim for x in dims), reverse=True):
        a = torch.prod(a, d, dtype=a.dtype)
    return a


for _name, (_ref, _cls, _out, _identity, _eager, _notes) in _REDUCTIONS.items():
    define_prim(
        f"{_name}(Tensor a, int[] dims) -> Tensor",
        "reduction",
        _reduction_meta(_name, _cls, _out, _identity),
        _ref,
        tags=("reduction",),
        notes=_notes,
        eager=_eager,
    )


def _arg_meta(name: str):
    def meta(a, dim):
        check_tensor(name, a)
        check_dtype(name, a, "real_bool")
        shape = reduced_shape(name, a, [dim])
        if a.dim() and a.shape[dim % a.dim()] == 0:  # an empty result is fine (eager's rule)
            fail(name, f"expected reduction dim {dim} to have non-zero size")
        return empty_contiguous(shape, torch.int64, a.device)

    return meta


define_prim(
    "argmax(Tensor a, int dim) -> Tensor",
    "reduction",
    _arg_meta("argmax"),
    lambda a, dim: torch.argmax(a, dim),
    tags=("reduction",),
    notes="int64; first occurrence; NaN counts as the maximum",
    eager=lambda a, dim: torch.argmax(a, dim),
)
define_prim(
    "argmin(Tensor a, int dim) -> Tensor",
    "reduction",
    _arg_meta("argmin"),
    lambda a, dim: torch.argmin(a, dim),
    tags=("reduction",),
    notes="int64; first occurrence; NaN counts as the minimum",
    eager=lambda a, dim: torch.argmin(a, dim),
)


def _var_meta(a, dims, correction):
    check_tensor("var", a)
    check_dtype("var", a, "float_complex")
    return empty_contiguous(reduced_shape("var", a, dims), real_of(a.dtype), a.device)


def _var(a, dims, correction):
    return _over(lambda x, d: torch.var(x, d, correction=correction))(a, dims)


define_prim(
    "var(Tensor a, int[] dims, float correction) -> Tensor",
    "reduction",
    _var_meta,
    _var,
    tags=("reduction",),
    notes="sum |a - mean|^2 / (N - correction); real dtype",
    eager=lambda a, dims, correction: (
        torch.var(a, dims, correction=correction) if dims else _var(a, [], correction)
    ),
)


def _var_mean_meta(a, dims, correction):
    var = _var_meta(a, dims, correction)
    return var, empty_contiguous(var.shape, a.dtype, a.device)


def _var_mean(a, dims, correction):
    if not dims:
        return _var_mean(a.unsqueeze(-1), [-1], correction)
    return torch.var_mean(a, list(dims), correction=correction)


define_prim(
    "var_mean(Tensor a, int[] dims, float correction) -> (Tensor, Tensor)",
    "reduction",
    _var_mean_meta,
    _var_mean,
    tags=("reduction",),
    notes="(var, mean)",
    eager=lambda a, dims, correction: (
        torch.var_mean(a, dims, correction=correction) if dims else _var_mean(a, [], correction)
    ),
)
