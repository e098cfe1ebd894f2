"""Compound pointwise ops: clamp, where, lerp, addcmul, xlogy, logaddexp, nan_to_num, ..."""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import (
    Kind,
    as_tensor,
    convert,
    device_of,
    elementwise_dtypes,
    is_integral,
)

aten = torch.ops.aten


def operands(*args, kind: Kind = Kind.DEFAULT):
    """All args as tensors of the computation dtype, plus the result dtype."""
    compute, result = elementwise_dtypes(*args, kind=kind)
    device = device_of(*args)
    return [None if a is None else as_tensor(a, compute, device) for a in args], result


@register_decomposition(aten.clamp.default, aten.clamp.Tensor)
def clamp(a, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    (x, lo, hi), result = operands(a, min, max)
    out = x
    # NaN bounds propagate (eager: clamp(x, nan) is nan); NaN inputs stay NaN.
    if lo is not None:
        out = (
            prims.where(prims.lt(out, lo), lo, out)
            if not x.dtype.is_floating_point
            else prims.where(prims.isnan(lo), lo, prims.where(prims.lt(out, lo), lo, out))
        )
    if hi is not None:
        out = (
            prims.where(prims.gt(out, hi), hi, out)
            if not x.dtype.is_floating_point
            else prims.where(prims.isnan(hi), hi, prims.where(prims.gt(out, hi), hi, out))
        )
    if out is x:
        out = prims.clone(x)
    return convert(out, result)


@register_decomposition(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(a, min):
    return clamp(a, min, None)


@register_decomposition(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(a, max):
    return clamp(a, None, max)


@register_decomposition(
    aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar
)
def where(condition, a, b):
    if condition.dtype != torch.bool:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a "
            f"tensor with dtype {condition.dtype}"
        )
    (x, y), result = operands(a, b)
    return convert(prims.where(condition, x, y), result)


@register_decomposition(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(start, end, weight):
    (s, e, w), result = operands(start, end, weight)
    diff = prims.sub(e, s)
    # Eager's two-sided formula: exact at both ends.
    small = prims.lt(prims.abs(w), scalar(0.5, w))
    low = prims.add(s, prims.mul(w, diff))
    high = prims.sub(e, prims.mul(diff, prims.sub(scalar(1, w), w)))
    return convert(prims.where(small, low, high), result)


@register_decomposition(aten.addcmul.default)
def addcmul(a, t1, t2, *, value=1):
    (x, y, z), result = operands(a, t1, t2)
    return convert(
        prims.add(x, prims.mul(as_tensor(value, x.dtype, x.device), prims.mul(y, z))), result
    )


@register_decomposition(aten.addcdiv.default)
def addcdiv(a, t1, t2, *, value=1):
    if is_integral(t1.dtype) and is_integral(t2.dtype):
        raise RuntimeError("Integer division with addcdiv is no longer supported")
    (x, y, z), result = operands(a, t1, t2)
    return convert(
        prims.add(x, prims.mul(as_tensor(value, x.dtype, x.device), prims.div(y, z))), result
    )


@register_decomposition(aten.frac.default)
def frac(a):
    return prims.sub(a, prims.trunc(a))


@register_decomposition(aten.deg2rad.default)
def deg2rad(a):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    return convert(prims.mul(x, scalar(math.pi / 180.0, x)), result)


@register_decomposition(aten.rad2deg.default)
def rad2deg(a):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    return convert(prims.mul(x, scalar(180.0 / math.pi, x)), result)


@register_decomposition(aten.sinc.default)
def sinc(a):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    pix = prims.mul(x, scalar(math.pi, x))
    zero = prims.eq(x, scalar(0, x))
    out = prims.where(zero, scalar(1, x), prims.div(prims.sin(pix), pix))
    return convert(out, result)


@register_decomposition(aten.nan_to_num.default)
def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    if is_integral(a.dtype):
        return prims.clone(a)
    if a.is_complex():  # eager replaces in each part on its own (limits of the part's dtype)
        parts = (nan_to_num(prims.real(a), nan, posinf, neginf),
                 nan_to_num(prims.imag(a), nan, posinf, neginf))  # fmt: skip
        return prims.complex(*parts)
    info = torch.finfo(a.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = prims.where(prims.isnan(a), scalar(0.0 if nan is None else nan, a), a)
    out = prims.where(prims.eq(a, scalar(math.inf, a)), scalar(posinf, a), out)
    return prims.where(prims.eq(a, scalar(-math.inf, a)), scalar(neginf, a), out)


@register_decomposition(aten.logit.default)
def logit(a, eps=None):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    if eps is not None:
        lo, hi = scalar(eps, x), scalar(1 - eps, x)
        x = prims.where(prims.lt(x, lo), lo, prims.where(prims.gt(x, hi), hi, x))
    return convert(prims.log(prims.div(x, prims.sub(scalar(1, x), x))), result)


@register_decomposition(aten.xlogy.Tensor, aten.xlogy.Scalar_Self, aten.xlogy.Scalar_Other)
def xlogy(a, b):
    (x, y), result = operands(a, b, kind=Kind.INT_TO_FLOAT)
    out = prims.where(prims.eq(x, scalar(0, x)), scalar(0, x), prims.mul(x, prims.log(y)))
    return convert(prims.where(prims.isnan(y), y, out), result)


@register_decomposition(
    aten.special_xlog1py.default,
    aten.special_xlog1py.self_scalar,
    aten.special_xlog1py.other_scalar,
)
def xlog1py(a, b):
    (x, y), result = operands(a, b, kind=Kind.INT_TO_FLOAT)
    out = prims.where(prims.eq(x, scalar(0, x)), scalar(0, x), prims.mul(x, prims.log1p(y)))
    return convert(prims.where(prims.isnan(y), y, out), result)


@register_decomposition(aten.special_entr.default)
def entr(a):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    neg = prims.lt(x, scalar(0, x))
    zero = prims.eq(x, scalar(0, x))
    body = prims.neg(prims.mul(x, prims.log(x)))
    out = prims.where(neg, scalar(-math.inf, x), prims.where(zero, scalar(0, x), body))
    return convert(prims.where(prims.isnan(x), x, out), result)


@register_decomposition(aten.angle.default)
def angle(a):
    if a.is_complex():  # the argument of z: atan2(im, re), in the real dtype as eager's
        return prims.atan2(prims.imag(a), prims.real(a))
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    out = prims.where(prims.lt(x, scalar(0, x)), scalar(math.pi, x), scalar(0, x))
    return convert(prims.where(prims.isnan(x), x, out), result)


@register_decomposition(aten.polygamma.default)
def polygamma(n, a):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    out = prims.digamma(x) if n == 0 else prims.polygamma(x, n)
    return convert(out, result)


@register_decomposition(aten.mvlgamma.default)
def mvlgamma(a, p):
    (x,), result = operands(a, kind=Kind.INT_TO_FLOAT)
    if not bool(prims.all(prims.gt(x, scalar((p - 1) / 2, x)), list(range(x.dim())))):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    total = prims.full([], p * (p - 1) / 4 * math.log(math.pi), dtype=x.dtype, device=x.device)
    for j in range(p):
        total = prims.add(total, prims.lgamma(prims.sub(x, scalar(j / 2, x))))
    return convert(total, result)


@register_decomposition(aten.round.decimals)
def round_decimals(a, *, decimals=0):
    return prims.round_decimals(a, decimals) if decimals else prims.round(a)


@register_decomposition(aten.heaviside.default)
def heaviside(a, values):
    (x, v), result = operands(a, values)
    zero = scalar(0, x)
    out = prims.where(prims.eq(x, zero), v, convert(prims.gt(x, zero), x.dtype))
    return convert(out, result)


@register_decomposition(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a, b, alpha=1):
    (x, y), result = operands(a, b)
    if alpha != 1:
        x = prims.mul(x, as_tensor(alpha, x.dtype, x.device))
    return convert(prims.sub(y, x), result)


@register_decomposition(aten.logaddexp.default)
def logaddexp(a, b):
    (x, y), result = operands(a, b, kind=Kind.INT_TO_FLOAT)
    hi, lo = prims.maximum(x, y), prims.minimum(x, y)
    both_inf = prims.logical_and(prims.isinf(x), prims.eq(x, y))
    out = prims.add(hi, prims.log1p(prims.exp(prims.sub(lo, hi))))
    return convert(prims.where(both_inf, x, out), result)


@register_decomposition(aten.logaddexp2.default)
def logaddexp2(a, b):
    (x, y), result = operands(a, b, kind=Kind.INT_TO_FLOAT)
    hi, lo = prims.maximum(x, y), prims.minimum(x, y)
    both_inf = prims.logical_and(prims.isinf(x), prims.eq(x, y))
    ln2 = scalar(math.log(2.0), x)
    tail = prims.div(prims.log1p(prims.exp2(prims.sub(lo, hi))), ln2)
    return convert(prims.where(both_inf, x, prims.add(hi, tail)), result)


@register_decomposition(aten.ldexp.Tensor)
def ldexp(a, b):
    (x, e), result = operands(a, b, kind=Kind.INT_TO_FLOAT)
    return convert(prims.mul(x, prims.exp2(e)), result)


@register_decomposition(aten.isposinf.default)
def isposinf(a):
    if is_integral(a.dtype):
        return prims.full(list(a.shape), False, dtype=torch.bool, device=a.device)
    return prims.eq(a, scalar(math.inf, a))


@register_decomposition(aten.isneginf.default)
def isneginf(a):
    if is_integral(a.dtype):
        return prims.full(list(a.shape), False, dtype=torch.bool, device=a.device)
    return prims.eq(a, scalar(-math.inf, a))


@register_decomposition(
    aten.float_power.Tensor_Tensor, aten.float_power.Tensor_Scalar, aten.float_power.Scalar
)
def float_power(a, b):
    dtype = (
        torch.complex128
        if any(
            (isinstance(v, torch.Tensor) and v.dtype.is_complex) or isinstance(v, complex)
            for v in (a, b)
        )
        else torch.float64
    )
    device = device_of(a, b)
    return prims.pow(as_tensor(a, dtype, device), as_tensor(b, dtype, device))


@register_decomposition(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(a, mask, value):
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got "
                f"tensor with {value.dim()} dimension(s)."
            )
        v = convert(value, a.dtype)
    else:
        v = scalar(value, a)
    return prims.where(mask, v, a)
