"""The ``@triton.jit`` helper functions every generated kernel module starts with:
eager-exact integer/float division and remainder, NaN-propagating max/min, reduction
combiners (argmax/argmin with eager's tie and NaN rules, Welford) and the counter-based
random hash of ember_primops.random (all arithmetic in uint32, wrapping)."""

from __future__ import annotations

HELPERS = """
@triton.jit
def _em_trip(n):
    # a loop bound that is a kernel argument (a symbolic row length); the CPU interpreter
    # replaces it (interpreter_reduce.py: its range() cannot take an argument tensor)
    return n


@triton.jit
def _em_round_bf16(x):
    # float32 -> nearest bfloat16 (ties to even), still as float32: exact everywhere (the
    # CPU interpreter's own float32 -> bfloat16 cast truncates)
    bits = x.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, rounded.to(tl.float32, bitcast=True))

@triton.jit
def _em_int_floordiv(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def _em_int_mod(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _em_float_mod(a, b):
    r = libdevice.fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _em_float_floordiv(a, b):
    r = libdevice.fmod(a, b)
    div = (a - r) / b
    div = tl.where((r != 0) & ((b < 0) != (r < 0)), div - 1.0, div)
    floor_div = tl.floor(div)
    floor_div = tl.where(div - floor_div > 0.5, floor_div + 1.0, floor_div)
    return tl.where(b == 0, a / b, floor_div)


@triton.jit
def _em_int_pow(a, b):
    result = tl.full(a.shape, 1, a.dtype) + a * 0
    base = a
    e = b
    for _ in tl.static_range(64):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    negative = b < 0
    inverse = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0))
    return tl.where(negative, inverse.to(a.dtype), result)


@triton.jit
def _em_maximum(a, b):
    # NaN-propagating, as eager's: one max.NaN instruction on floats where two compares and
    # a select were 10% of a softmax's time (XGLM's rows of 512 on an H200)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _em_minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _em_add(a, b):
    return a + b


@triton.jit
def _em_mul(a, b):
    return a * b


@triton.jit
def _em_or(a, b):
    return a | b


@triton.jit
def _em_and(a, b):
    return a & b


@triton.jit
def _em_xor(a, b):
    return a ^ b


@triton.jit
def _em_argmax_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    better = (v1 > v2) | (nan1 & ~nan2)
    same = (v1 == v2) | (nan1 & nan2)
    take1 = better | (same & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def _em_argmin_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    better = (v1 < v2) | (nan1 & ~nan2)
    same = (v1 == v2) | (nan1 & nan2)
    take1 = better | (same & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def _em_welford_combine(mean1, m2_1, w1, mean2, m2_2, w2):
    w = w1 + w2
    share = tl.where(w == 0, 0.0, w2 / tl.where(w == 0, 1.0, w))
    delta = mean2 - mean1
    return mean1 + delta * share, m2_1 + m2_2 + delta * delta * w1 * share, w


@triton.jit
def _em_reduce_maximum(x):
    return tl.reduce(x, 1, _em_maximum, keep_dims=True)


@triton.jit
def _em_reduce_minimum(x):
    return tl.reduce(x, 1, _em_minimum, keep_dims=True)


@triton.jit
def _em_reduce_mul(x):
    return tl.reduce(x, 1, _em_mul, keep_dims=True)


@triton.jit
def _em_reduce_or(x):
    return tl.reduce(x, 1, _em_or, keep_dims=True)


@triton.jit
def _em_reduce_and(x):
    return tl.reduce(x, 1, _em_and, keep_dims=True)


@triton.jit
def _em_reduce_xor(x):
    return tl.reduce(x, 1, _em_xor, keep_dims=True)


@triton.jit
def _em_reduce_argmax(v, i):
    return tl.reduce((v, i), 1, _em_argmax_combine, keep_dims=True)


@triton.jit
def _em_reduce_argmin(v, i):
    return tl.reduce((v, i), 1, _em_argmin_combine, keep_dims=True)


@triton.jit
def _em_reduce_welford(mean, m2, w):
    return tl.reduce((mean, m2, w), 1, _em_welford_combine, keep_dims=True)


@triton.jit
def _em_mix32(x):
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@triton.jit
def _em_random_key(seed, golden_stream):
    s = seed.to(tl.uint64, bitcast=True)
    lo = (s & 0xFFFFFFFF).to(tl.uint32)
    hi = (s >> 32).to(tl.uint32)
    return _em_mix32(_em_mix32(hi ^ golden_stream) ^ lo)


@triton.jit
def _em_random_bits(key, n):
    u = n.to(tl.uint64, bitcast=True)
    lo = (u & 0xFFFFFFFF).to(tl.uint32)
    hi = (u >> 32).to(tl.uint32)
    return _em_mix32(_em_mix32(lo ^ key) ^ hi).to(tl.int64)
"""
