"""Reductions: sum/mean/prod/amax/argmax/var/std/any/all/norm/logsumexp with keepdim and dtype."""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import keep_dims, reduction_dims, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.pointwise import operands
from ember_primops.decompositions.type_promotion import computation_dtype, convert, is_integral

aten = torch.ops.aten


def _accumulate_dtype(a: torch.Tensor, dtype: torch.dtype | None) -> torch.dtype:
    if dtype is not None:
        return dtype
    return torch.int64 if is_integral(a.dtype) else a.dtype


def _reduce(prim, a, dims, keepdim):
    dims = reduction_dims(dims, a.dim())
    if a.dim() == 0:
        return prim(a, [])
    return keep_dims(prim(a, dims), dims, keepdim)


@register_decomposition(aten.sum.dim_IntList, aten.sum.default)
def sum_(a, dim=None, keepdim=False, *, dtype=None):
    return _reduce(prims.sum, convert(a, _accumulate_dtype(a, dtype)), dim, keepdim)


@register_decomposition(aten.nansum.default)
def nansum(a, dim=None, keepdim=False, *, dtype=None):
    if a.dtype.is_floating_point:
        a = prims.where(prims.isnan(a), scalar(0, a), a)
    return sum_(a, dim, keepdim, dtype=dtype)


@register_decomposition(aten.prod.default, aten.prod.dim_int)
def prod(a, dim=None, keepdim=False, *, dtype=None):
    return _reduce(prims.prod, convert(a, _accumulate_dtype(a, dtype)), dim, keepdim)


@register_decomposition(aten.mean.default, aten.mean.dim)
def mean(a, dim=None, keepdim=False, *, dtype=None):
    out_dtype = dtype or a.dtype
    if is_integral(out_dtype):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {out_dtype}"
        )
    compute = computation_dtype(out_dtype)
    dims = reduction_dims(dim, a.dim())
    count = math.prod(a.shape[d] for d in dims) if a.dim() else 1
    total = _reduce(prims.sum, convert(a, compute), dim, keepdim)
    return convert(
        prims.div(total, prims.scalar_tensor(count, dtype=compute, device=a.device)), out_dtype
    )


def _check_nonempty(name, a, dims):
    for d in dims:
        if a.dim() and a.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if not dims and a.numel() == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )


@register_decomposition(aten.amax.default)
def amax(a, dim=(), keepdim=False):
    _check_nonempty("amax", a, reduction_dims(dim, a.dim()))
    return _reduce(prims.amax, a, dim, keepdim)


@register_decomposition(aten.amin.default)
def amin(a, dim=(), keepdim=False):
    _check_nonempty("amin", a, reduction_dims(dim, a.dim()))
    return _reduce(prims.amin, a, dim, keepdim)


@register_decomposition(aten.max.default)
def max_(a):
    _check_nonempty("max", a, [])
    return prims.amax(a, list(range(a.dim())))


@register_decomposition(aten.min.default)
def min_(a):
    _check_nonempty("min", a, [])
    return prims.amin(a, list(range(a.dim())))


def _arg_reduce(prim, a, dim, keepdim):
    if dim is None:
        flat = prims.reshape(a, [a.numel()])
        out = prim(flat, 0) if flat.numel() else None
        if out is None:
            raise RuntimeError("argmax/argmin: cannot reduce an empty tensor without a dim")
        return prims.reshape(out, [1] * a.dim()) if keepdim else out
    d = reduction_dims(dim, a.dim())
    if a.dim() == 0:
        return prims.full([], 0, dtype=torch.int64, device=a.device)
    return keep_dims(prim(a, d[0]), d, keepdim)


@register_decomposition(aten.argmax.default)
def argmax(a, dim=None, keepdim=False):
    return _arg_reduce(prims.argmax, a, dim, keepdim)


@register_decomposition(aten.argmin.default)
def argmin(a, dim=None, keepdim=False):
    return _arg_reduce(prims.argmin, a, dim, keepdim)


def _orderable(a):
    """max/min over a dim take bool input (cumprod's backward finds its first zero so);
    argmax/argmin do not: their index is that of the same tensor as uint8."""
    return convert(a, torch.uint8) if a.dtype == torch.bool else a


@register_decomposition(aten.max.dim)
def max_dim(a, dim, keepdim=False):
    return amax(a, [dim], keepdim), argmax(_orderable(a), dim, keepdim)


@register_decomposition(aten.min.dim)
def min_dim(a, dim, keepdim=False):
    return amin(a, [dim], keepdim), argmin(_orderable(a), dim, keepdim)


@register_decomposition(aten.aminmax.default)
def aminmax(a, *, dim=None, keepdim=False):
    dims = None if dim is None else [dim]
    if dims is None and keepdim:
        return (prims.reshape(amin(a), [1] * a.dim()), prims.reshape(amax(a), [1] * a.dim()))
    return amin(a, dims or (), keepdim), amax(a, dims or (), keepdim)


def _as_bool(a):
    return a if a.dtype == torch.bool else prims.ne(a, scalar(0, a))


def _logical_reduce(prim, a, dim, keepdim):
    out = _reduce(prim, _as_bool(a), dim, keepdim)
    return convert(out, torch.uint8) if a.dtype == torch.uint8 else out


@register_decomposition(aten.any.default, aten.any.dim, aten.any.dims)
def any_(a, dim=None, keepdim=False):
    return _logical_reduce(prims.any, a, dim, keepdim)


@register_decomposition(aten.all.default, aten.all.dim, aten.all.dims)
def all_(a, dim=None, keepdim=False):
    return _logical_reduce(prims.all, a, dim, keepdim)


@register_decomposition(aten.count_nonzero.default, aten.count_nonzero.dim_IntList)
def count_nonzero(a, dim=None):
    return sum_(convert(_as_bool(a), torch.int64), dim)


def _correction(correction, unbiased=None):
    if correction is not None:
        return float(correction)
    return 1.0 if unbiased is None or unbiased else 0.0


@register_decomposition(aten.var.correction)
def var(a, dim=None, *, correction=None, keepdim=False):
    compute = computation_dtype(a.dtype)
    out = _reduce(
        lambda x, d: prims.var(x, d, _correction(correction)), convert(a, compute), dim, keepdim
    )
    return convert(out, a.dtype)


@register_decomposition(aten.std.correction)
def std(a, dim=None, *, correction=None, keepdim=False):
    compute = computation_dtype(a.dtype)
    return convert(
        prims.sqrt(var(convert(a, compute), dim, correction=correction, keepdim=keepdim)), a.dtype
    )


@register_decomposition(aten.var_mean.correction)
def var_mean(a, dim=None, *, correction=None, keepdim=False):
    compute = computation_dtype(a.dtype)
    dims = reduction_dims(dim, a.dim())
    v, m = prims.var_mean(convert(a, compute), dims if a.dim() else [], _correction(correction))
    return (
        convert(keep_dims(v, dims, keepdim and a.dim() > 0), a.dtype),
        convert(keep_dims(m, dims, keepdim and a.dim() > 0), a.dtype),
    )


@register_decomposition(aten.std_mean.correction)
def std_mean(a, dim=None, *, correction=None, keepdim=False):
    v, m = var_mean(a, dim, correction=correction, keepdim=keepdim)
    return convert(prims.sqrt(convert(v, computation_dtype(v.dtype))), a.dtype), m


@register_decomposition(aten.logsumexp.default)
def logsumexp(a, dim=(), keepdim=False):
    out_dtype = torch.get_default_dtype() if is_integral(a.dtype) else a.dtype
    x = convert(a, computation_dtype(out_dtype))
    dims = reduction_dims(dim, x.dim())
    if x.numel() == 0:
        return convert(prims.log(_reduce(prims.sum, prims.exp(x), dims, keepdim)), out_dtype)
    top = _reduce(prims.amax, x, dims, True)
    top = prims.where(prims.isinf(top), scalar(0, top), top)
    shifted = (
        prims.sum(prims.exp(prims.sub(x, top)), dims) if x.dim() else prims.exp(prims.sub(x, top))
    )
    top_reduced = prims.squeeze(top, dims) if x.dim() else top
    out = prims.add(prims.log(shifted), top_reduced)
    return convert(keep_dims(out, dims, keepdim and x.dim() > 0), out_dtype)


@register_decomposition(aten.linalg_vector_norm.default)
def vector_norm(a, ord=2, dim=None, keepdim=False, *, dtype=None):
    if is_integral(a.dtype):
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {a.dtype}"
        )
    out_dtype = dtype or a.dtype
    x = convert(prims.abs(convert(a, computation_dtype(out_dtype))), computation_dtype(out_dtype))
    ord = float(ord)
    if ord == math.inf:
        out = _reduce(prims.amax, x, dim, keepdim)
    elif ord == -math.inf:
        out = _reduce(prims.amin, x, dim, keepdim)
    elif ord == 0:
        out = _reduce(prims.sum, convert(prims.ne(x, scalar(0, x)), x.dtype), dim, keepdim)
    elif ord == 1:
        out = _reduce(prims.sum, x, dim, keepdim)
    elif ord == 2:
        out = prims.sqrt(_reduce(prims.sum, prims.mul(x, x), dim, keepdim))
    else:
        powered = _reduce(prims.sum, prims.pow(x, scalar(ord, x)), dim, keepdim)
        out = prims.pow(powered, scalar(1.0 / ord, x))
    return convert(out, out_dtype)


@register_decomposition(
    aten.norm.Scalar,
    aten.norm.ScalarOpt_dim,
    aten.norm.ScalarOpt_dtype,
    aten.norm.ScalarOpt_dim_dtype,
)
def norm(a, p=2, dim=None, keepdim=False, *, dtype=None):
    p = 2 if p is None else p
    if isinstance(dim, torch.dtype):  # norm.ScalarOpt_dtype(self, p, *, dtype)
        dim, dtype = None, dim
    return vector_norm(a, p, dim, keepdim, dtype=dtype)


@register_decomposition(aten.is_nonzero.default)
def is_nonzero(a):
    if a.numel() != 1:
        raise RuntimeError(
            "Boolean value of Tensor with more than one value is ambiguous"
            if a.numel()
            else "Boolean value of Tensor with no values is ambiguous"
        )
    return bool(prims.ne(a, scalar(0, a)).item())


@register_decomposition(aten.equal.default)
def equal(a, b):
    if a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    same = prims.eq(a, convert(b, a.dtype)) if a.dtype != b.dtype else prims.eq(a, b)
    return bool(prims.all(same, list(range(a.dim()))).item())


@register_decomposition(aten.allclose.default)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = aten.isclose.default(a, b, rtol, atol, equal_nan)
    return bool(prims.all(close, list(range(close.dim()))).item())


@register_decomposition(aten.isclose.default)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{a.dtype} did not match {b.dtype}")
    exact = prims.eq(a, b)
    if is_integral(a.dtype):
        x, y = convert(a, torch.float64), convert(b, torch.float64)
    else:
        x, y = a, b
    tol = prims.add(scalar(atol, x), prims.mul(scalar(rtol, y), prims.abs(y)))
    near = prims.le(prims.abs(prims.sub(x, y)), tol)
    if x.dtype.is_floating_point:
        near = prims.logical_and(near, prims.isfinite(prims.sub(x, y)))
    out = prims.logical_or(exact, near)
    if equal_nan and a.dtype.is_floating_point:
        out = prims.logical_or(out, prims.logical_and(prims.isnan(a), prims.isnan(b)))
    return out


@register_decomposition(aten.dist.default)
def dist(a, b, p=2):
    (x, y), result = operands(a, b)
    return convert(vector_norm(prims.sub(x, y), p), result)


@register_decomposition(aten.renorm.default)
def renorm(a, p, dim, maxnorm):
    d = reduction_dims(dim, a.dim())[0]
    others = [i for i in range(a.dim()) if i != d]
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    norms = keep_dims(vector_norm(x, p, others), others, True)
    factor = prims.where(
        prims.gt(norms, scalar(maxnorm, norms)),
        prims.div(scalar(maxnorm, norms), prims.add(norms, scalar(1e-7, norms))),
        scalar(1, norms),
    )
    return convert(prims.mul(x, factor), a.dtype)
