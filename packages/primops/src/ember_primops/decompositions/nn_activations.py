"""Activations and softmax: relu/gelu/silu/elu/hardtanh/..., _softmax, _log_softmax, glu."""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def upcast(a: torch.Tensor) -> torch.Tensor:
    """``a`` in its computation dtype (half precision computes in float32, like eager)."""
    return convert(a, computation_dtype(a.dtype))


def _softmax_dim(a, dim):
    return canonical_dim(dim, a.dim()) if a.dim() else None


def _shifted(x, dim):
    """x - max(x, dim) (the max of an all -inf row is replaced by 0 to avoid NaN)."""
    if x.numel() == 0:
        return x
    top = prims.expand_dims(prims.amax(x, [dim]), [dim])
    top = prims.where(prims.isinf(top), scalar(0, top), top)
    return prims.sub(x, top)


@register_decomposition(aten._softmax.default)
def softmax(a, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else a.dtype
    x = upcast(a)
    d = _softmax_dim(x, dim)
    if d is None:
        return convert(prims.exp(prims.sub(x, x)), out_dtype)
    e = prims.exp(_shifted(x, d))
    total = prims.expand_dims(prims.sum(e, [d]), [d])
    # One division a row, then a multiply an element. Eager's CPU kernel does the same (the
    # same rounding); its CUDA kernels divide each element, which on a GPU is a
    # multi-instruction IEEE division per element (torch.compile's Triton `/` is the
    # approximate one, within 2 ulp): the exact reciprocal times the element stays within
    # 1 ulp of eager's float32 quotient, and rounds to the same bfloat16 almost always.
    return convert(prims.mul(e, prims.div(scalar(1, total), total)), out_dtype)


@register_decomposition(aten._log_softmax.default)
def log_softmax(a, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else a.dtype
    x = upcast(a)
    d = _softmax_dim(x, dim)
    if d is None:
        return convert(prims.sub(x, x), out_dtype)
    s = _shifted(x, d)
    lse = prims.expand_dims(prims.log(prims.sum(prims.exp(s), [d])), [d])
    return convert(prims.sub(s, lse), out_dtype)


@register_decomposition(aten._safe_softmax.default)
def safe_softmax(a, dim, dtype=None):
    x = convert(a, dtype) if dtype is not None else a
    out = softmax(x, dim, False)
    d = _softmax_dim(x, dim)
    if d is None:
        return out
    all_masked = prims.expand_dims(prims.all(prims.eq(x, scalar(-math.inf, x)), [d]), [d])
    return prims.where(all_masked, scalar(0, out), out)


@register_decomposition(aten.relu.default)
def relu(a):
    return prims.where(prims.le(a, scalar(0, a)), scalar(0, a), a)


@register_decomposition(aten.threshold.default)
def threshold(a, threshold, value):
    return prims.where(prims.le(a, scalar(threshold, a)), scalar(value, a), a)


@register_decomposition(aten.gelu.default)
def gelu(a, *, approximate="none"):
    x = upcast(a)
    half = scalar(0.5, x)
    if approximate == "tanh":
        inner = prims.mul(
            scalar(math.sqrt(2 / math.pi), x),
            prims.add(x, prims.mul(scalar(0.044715, x), prims.mul(x, prims.mul(x, x)))),
        )
        out = prims.mul(prims.mul(half, x), prims.add(scalar(1, x), prims.tanh(inner)))
    else:
        cdf = prims.mul(
            half, prims.add(scalar(1, x), prims.erf(prims.mul(x, scalar(1 / math.sqrt(2), x))))
        )
        out = prims.mul(x, cdf)
    return convert(out, a.dtype)


@register_decomposition(aten.silu.default)
def silu(a):
    x = upcast(a)
    return convert(prims.mul(x, prims.sigmoid(x)), a.dtype)


@register_decomposition(aten.mish.default)
def mish(a):
    x = upcast(a)
    return convert(prims.mul(x, prims.tanh(_softplus(x, 1.0, 20.0))), a.dtype)


def _softplus(x, beta, threshold):
    scaled = prims.mul(x, scalar(beta, x)) if beta != 1 else x
    soft = prims.log1p(prims.exp(scaled))
    if beta != 1:
        soft = prims.div(soft, scalar(beta, x))
    return prims.where(prims.gt(scaled, scalar(threshold, x)), x, soft)


@register_decomposition(aten.softplus.default)
def softplus(a, beta=1, threshold=20):
    return convert(_softplus(upcast(a), beta, threshold), a.dtype)


@register_decomposition(aten.elu.default)
def elu(a, alpha=1, scale=1, input_scale=1):
    x = upcast(a)
    negative = prims.mul(scalar(alpha, x), prims.expm1(prims.mul(x, scalar(input_scale, x))))
    out = prims.where(prims.le(x, scalar(0, x)), negative, x)
    return convert(prims.mul(out, scalar(scale, x)), a.dtype)


@register_decomposition(aten.celu.default)
def celu(a, alpha=1.0):
    x = upcast(a)
    negative = prims.mul(scalar(alpha, x), prims.expm1(prims.div(x, scalar(alpha, x))))
    return convert(prims.where(prims.le(x, scalar(0, x)), negative, x), a.dtype)


@register_decomposition(aten.leaky_relu.default)
def leaky_relu(a, negative_slope=0.01):
    return prims.where(prims.gt(a, scalar(0, a)), a, prims.mul(a, scalar(negative_slope, a)))


@register_decomposition(aten.hardtanh.default)
def hardtanh(a, min_val=-1, max_val=1):
    return aten.clamp.default(a, min_val, max_val)


@register_decomposition(aten.hardsigmoid.default)
def hardsigmoid(a):
    x = upcast(a)
    out = prims.div(aten.clamp.default(prims.add(x, scalar(3, x)), 0, 6), scalar(6, x))
    return convert(out, a.dtype)


@register_decomposition(aten.hardswish.default)
def hardswish(a):
    x = upcast(a)
    gate = prims.div(aten.clamp.default(prims.add(x, scalar(3, x)), 0, 6), scalar(6, x))
    return convert(prims.mul(x, gate), a.dtype)


@register_decomposition(aten.hardshrink.default)
def hardshrink(a, lambd=0.5):
    inside = prims.le(prims.abs(a), scalar(lambd, a))
    return prims.where(inside, scalar(0, a), a)


@register_decomposition(aten.softshrink.default)
def softshrink(a, lambd=0.5):
    lam = scalar(lambd, a)
    out = prims.where(prims.gt(a, lam), prims.sub(a, lam), scalar(0, a))
    return prims.where(prims.lt(a, prims.neg(lam)), prims.add(a, lam), out)


@register_decomposition(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(a):
    x = upcast(a)
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); the buffer is unused by our backward.
    out = prims.sub(prims.minimum(x, scalar(0, x)), prims.log1p(prims.exp(prims.neg(prims.abs(x)))))
    return convert(out, a.dtype), prims.full([0], 0, dtype=a.dtype, device=a.device)


@register_decomposition(aten.glu.default)
def glu(a, dim=-1):
    d = canonical_dim(dim, a.dim())
    if a.shape[d] % 2:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {d} is size {a.shape[d]}"
        )
    half = a.shape[d] // 2
    first = aten.slice.Tensor(a, d, 0, half)
    second = aten.slice.Tensor(a, d, half, 2 * half)
    x = upcast(first)
    return convert(prims.mul(x, prims.sigmoid(upcast(second))), a.dtype)


@register_decomposition(aten._prelu_kernel.default)
def prelu_kernel(a, weight):
    return prims.where(prims.gt(a, scalar(0, a)), a, prims.mul(a, weight))
