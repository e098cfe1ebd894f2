"""Random ops over next_seed + uniform/normal: the seed is drawn when the graph runs.

Every decomposition calls ``prims.next_seed`` (the one impure prim) instead of baking a
trace-time seed into the graph, then shapes the uniform/normal bits into the distribution.
Values differ from eager's generator (same distribution, different stream): the inductor
backend uses them (its kernels draw their own numbers, as torch.compile's inductor does unless
``fallback_random``); ``decomposition_table(random=False)`` leaves them out, so that a graph
keeps the aten ops and draws from torch's generator as eager does (the aot_eager backend).
"""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import broadcast_shapes, scalar
from ember_primops.decompositions._registry import register_decomposition as _register
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def register_decomposition(*ops):
    """Every row of this module draws from ``prims.next_seed``."""
    return _register(*ops, draws_random=True)


def uniform_like(shape, dtype, device) -> torch.Tensor:
    """Uniform [0, 1) samples in ``dtype``'s computation dtype, with a fresh run-time seed."""
    device = torch.device(device)
    seed = prims.next_seed(device)
    return prims.uniform(list(shape), seed, 0, dtype=computation_dtype(dtype), device=device)


def normal_like(shape, dtype, device) -> torch.Tensor:
    device = torch.device(device)
    seed = prims.next_seed(device)
    return prims.normal(list(shape), seed, 0, dtype=computation_dtype(dtype), device=device)


def _dtype(dtype):
    return torch.get_default_dtype() if dtype is None else dtype


def _device(device):
    return torch.device("cpu") if device is None else torch.device(device)


@register_decomposition(aten.uniform.default)
def uniform(a, from_=0.0, to=1.0, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    return convert(prims.add(prims.mul(u, scalar(to - from_, u)), scalar(from_, u)), a.dtype)


@register_decomposition(aten.normal_functional.default)
def normal_functional(a, mean=0.0, std=1.0, *, generator=None):
    n = normal_like(a.shape, a.dtype, a.device)
    return convert(prims.add(prims.mul(n, scalar(std, n)), scalar(mean, n)), a.dtype)


@register_decomposition(
    aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor
)
def normal_tensors(mean, std=1.0, *, generator=None):
    like = mean if isinstance(mean, torch.Tensor) else std
    shape = broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, torch.Tensor)))
    n = normal_like(shape, like.dtype, like.device)
    m = convert(mean, n.dtype) if isinstance(mean, torch.Tensor) else scalar(mean, n)
    s = convert(std, n.dtype) if isinstance(std, torch.Tensor) else scalar(std, n)
    return convert(prims.add(prims.mul(n, s), m), like.dtype)


@register_decomposition(aten.normal.float_float)
def normal_float_float(
    mean, std, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None
):
    n = normal_like(size, _dtype(dtype), _device(device))
    return convert(prims.add(prims.mul(n, scalar(std, n)), scalar(mean, n)), _dtype(dtype))


@register_decomposition(aten.rand.default)
def rand(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return convert(uniform_like(size, _dtype(dtype), _device(device)), _dtype(dtype))


@register_decomposition(aten.randn.default)
def randn(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return convert(normal_like(size, _dtype(dtype), _device(device)), _dtype(dtype))


@register_decomposition(aten.rand_like.default)
def rand_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = a.dtype if dtype is None else dtype
    return convert(uniform_like(a.shape, dtype, device or a.device), dtype)


@register_decomposition(aten.randn_like.default)
def randn_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = a.dtype if dtype is None else dtype
    return convert(normal_like(a.shape, dtype, device or a.device), dtype)


def _randint(low, high, shape, dtype, device):
    u = uniform_like(shape, torch.float64, device)
    span = prims.floor(
        prims.mul(
            convert(u, torch.float64),
            prims.scalar_tensor(float(high - low), dtype=torch.float64, device=u.device),
        )
    )
    value = prims.add(span, prims.scalar_tensor(float(low), dtype=torch.float64, device=u.device))
    return convert(value, dtype)


@register_decomposition(aten.randint.default, aten.randint.low)
def randint(*args, dtype=None, layout=None, device=None, pin_memory=None, generator=None):
    low, high, size = (0, *args) if len(args) == 2 else args
    return _randint(low, high, size, torch.int64 if dtype is None else dtype, _device(device))


@register_decomposition(aten.randint_like.default, aten.randint_like.low_dtype)
def randint_like(
    a, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    low, high = (0, *args) if len(args) == 1 else args
    return _randint(low, high, a.shape, a.dtype if dtype is None else dtype, device or a.device)


@register_decomposition(aten.bernoulli.default)
def bernoulli(a, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    return convert(prims.lt(u, convert(a, u.dtype)), a.dtype)


@register_decomposition(aten.bernoulli.p, aten.bernoulli.Tensor)
def bernoulli_p(a, p=0.5, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    prob = convert(p, u.dtype) if isinstance(p, torch.Tensor) else scalar(p, u)
    return convert(prims.lt(u, prob), a.dtype)


@register_decomposition(aten.exponential.default)
def exponential(a, lambd=1.0, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    out = prims.div(prims.neg(prims.log1p(prims.neg(u))), scalar(lambd, u))
    return convert(out, a.dtype)


@register_decomposition(aten.cauchy.default)
def cauchy(a, median=0.0, sigma=1.0, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    angle = prims.mul(prims.sub(u, scalar(0.5, u)), scalar(math.pi, u))
    return convert(
        prims.add(prims.mul(prims.tan(angle), scalar(sigma, u)), scalar(median, u)), a.dtype
    )


@register_decomposition(aten.log_normal.default)
def log_normal(a, mean=1.0, std=2.0, *, generator=None):
    n = normal_like(a.shape, a.dtype, a.device)
    return convert(prims.exp(prims.add(prims.mul(n, scalar(std, n)), scalar(mean, n))), a.dtype)


@register_decomposition(aten.geometric.default)
def geometric(a, p, *, generator=None):
    u = uniform_like(a.shape, a.dtype, a.device)
    trials = prims.ceil(prims.div(prims.log1p(prims.neg(u)), scalar(math.log1p(-p), u)))
    return convert(prims.maximum(trials, scalar(1, trials)), a.dtype)


@register_decomposition(aten.native_dropout.default)
def native_dropout(a, p, train):
    if not train or p == 0:
        keep = prims.full(list(a.shape), True, dtype=torch.bool, device=a.device)
        return prims.clone(a), keep
    if p == 1:
        return prims.full(list(a.shape), 0, dtype=a.dtype, device=a.device), prims.full(
            list(a.shape), False, dtype=torch.bool, device=a.device
        )
    u = uniform_like(a.shape, a.dtype, a.device)
    keep = prims.lt(u, scalar(1 - p, u))
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    out = prims.mul(prims.mul(x, convert(keep, compute)), scalar(1.0 / (1 - p), x))
    return convert(out, a.dtype), keep
