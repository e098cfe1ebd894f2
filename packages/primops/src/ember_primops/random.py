"""Random prims: counter-based, so a value depends only on (seed, offset + linear index).

Algorithm (all steps are unsigned 32-bit integer operations, so C++ ``uint32_t`` code and Triton
``tl.uint32`` code reproduce the bits exactly):

    mix32(x):  x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16
    key(seed, stream) = mix32(mix32(seed_hi ^ (0x9E3779B9 * (stream + 1))) ^ seed_lo)
    bits(seed, stream, n) = mix32(mix32(n_lo ^ key) ^ n_hi)

where ``seed_lo``/``seed_hi`` are the low/high 32 bits of the int64 seed, ``n = offset + i`` is the
int64 counter of element ``i`` (row-major linear index) and ``n_lo``/``n_hi`` its halves. Multiplies
wrap modulo 2**32. For a fixed key, ``bits`` is a bijection of ``n_lo``: 2**32 consecutive counters
never repeat a value.

* ``random_bits``: ``bits(seed, 0, n)`` as int64 in [0, 2**32).
* ``uniform``: ``(bits(seed, 0, n) >> (32 - m)) * 2**-m`` with m = 11 (float16), 8 (bfloat16),
  24 (float32), 32 (float64): exact in the dtype, in [0, 1).
* ``normal``: Box-Muller, ``sqrt(-2 log(u1)) * cos(2 pi u2)`` with ``u1 = (b1 + 1) * 2**-k`` in
  (0, 1] and ``u2 = b2 * 2**-k`` from streams 1 and 2 (``b = bits >> (32 - k)``); k = 24 computed in
  float32 for dtypes up to float32, k = 32 computed in float64 for float64.

A call consumes counters ``offset .. offset + numel - 1``; the caller advances the offset.
``next_seed`` is the only impure prim: it draws a seed from torch's default generator of the
seed's device (the CPU one for every device but CUDA).
"""

from __future__ import annotations

import math

import torch

from ._checks import check_int_list, check_tensor, contiguous_strides
from ._registry import define_prim, fail

MASK32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9
MIX_MUL1 = 0x7FEB352D
MIX_MUL2 = 0x846CA68B
MANTISSA_BITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 32}


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    # (x * c) mod 2**32 for x in [0, 2**32), without int64 overflow: split x into 16-bit halves.
    lo, hi = x & 0xFFFF, x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, MIX_MUL1)
    x = x ^ (x >> 15)
    x = _mul32(x, MIX_MUL2)
    return x ^ (x >> 16)


def stream_key(seed: torch.Tensor, stream: int) -> torch.Tensor:
    seed = seed.to(torch.int64)
    seed_lo, seed_hi = seed & MASK32, (seed >> 32) & MASK32
    return mix32(mix32(seed_hi ^ ((GOLDEN * (stream + 1)) & MASK32)) ^ seed_lo)


def counter_bits(
    shape, seed: torch.Tensor, offset: int, stream: int, device: torch.device
) -> torch.Tensor:
    """The 32 random bits (as int64) of every element of a ``shape`` tensor."""
    numel = math.prod(shape)
    n = torch.arange(offset, offset + numel, dtype=torch.int64, device=device)
    key = stream_key(seed.to(device), stream)
    return mix32(mix32((n & MASK32) ^ key) ^ (n >> 32)).reshape(list(shape))


def _check(p: str, shape, seed, offset) -> None:
    check_int_list(p, shape, "shape")
    check_tensor(p, seed, "seed")
    if seed.dtype != torch.int64 or seed.ndim != 0:
        fail(
            p, f"seed must be a 0-dim int64 tensor, got {seed.dtype}{list(seed.shape)}", dtype=True
        )
    if offset < 0:
        fail(p, f"offset must be >= 0, got {offset}")


def _check_float(p: str, dtype: torch.dtype) -> None:
    if dtype not in MANTISSA_BITS:
        fail(p, f"dtype must be float16, bfloat16, float32 or float64, got {dtype}", dtype=True)


def _out_device(seed: torch.Tensor, device) -> torch.device:
    return torch.device("meta") if seed.device.type == "meta" else torch.device(device)


def _random_meta(p: str, floating: bool):
    def meta(shape, seed, offset, *, dtype=torch.int64, device):
        _check(p, shape, seed, offset)
        if floating:
            _check_float(p, dtype)
        return torch.empty_strided(
            shape, contiguous_strides(shape), dtype=dtype, device=_out_device(seed, device)
        )

    return meta


def _random_bits(shape, seed, offset, *, device):
    _check("random_bits", shape, seed, offset)
    return counter_bits(shape, seed, offset, 0, torch.device(device))


def _uniform(shape, seed, offset, *, dtype, device):
    _check("uniform", shape, seed, offset)
    _check_float("uniform", dtype)
    m = MANTISSA_BITS[dtype]
    bits = counter_bits(shape, seed, offset, 0, torch.device(device))
    return ((bits >> (32 - m)).to(torch.float64) * 2.0**-m).to(dtype)


def _normal(shape, seed, offset, *, dtype, device):
    _check("normal", shape, seed, offset)
    _check_float("normal", dtype)
    compute, k = (torch.float64, 32) if dtype == torch.float64 else (torch.float32, 24)
    device = torch.device(device)
    b1 = counter_bits(shape, seed, offset, 1, device) >> (32 - k)
    b2 = counter_bits(shape, seed, offset, 2, device) >> (32 - k)
    u1 = ((b1 + 1).to(torch.float64) * 2.0**-k).to(compute)
    u2 = (b2.to(torch.float64) * 2.0**-k).to(compute)
    radius = torch.sqrt(-2.0 * torch.log(u1))
    return (radius * torch.cos((2.0 * math.pi) * u2)).to(dtype)


define_prim(
    "random_bits(SymInt[] shape, Tensor seed, int offset, *, Device device) -> Tensor",
    "random",
    _random_meta("random_bits", False),
    _random_bits,
    notes="int64 in [0, 2**32): the counter hash, stream 0",
    check_reference=False,
)
define_prim(
    "uniform(SymInt[] shape, Tensor seed, int offset, *, ScalarType dtype, Device device)"
    " -> Tensor",
    "random",
    _random_meta("uniform", True),
    _uniform,
    notes="[0, 1) from the top mantissa bits of random_bits",
    check_reference=False,
)
define_prim(
    "normal(SymInt[] shape, Tensor seed, int offset, *, ScalarType dtype, Device device) -> Tensor",
    "random",
    _random_meta("normal", True),
    _normal,
    notes="standard normal, Box-Muller over streams 1 and 2",
    check_reference=False,
)


def _next_seed_meta(device):
    return torch.empty((), dtype=torch.int64, device=device)


def _next_seed(device):
    device = torch.device(device)
    if device.type == "cuda":
        # Drawn on the device from its own generator, as eager's CUDA random ops draw: a host
        # seed copied over would synchronize the stream (a pageable host-to-device copy) and
        # cannot be recorded in a CUDA graph, whose replays advance this generator instead.
        return torch.randint(0, 2**62, (), dtype=torch.int64, device=device)
    seed = torch.randint(0, 2**62, (), dtype=torch.int64)
    return seed.to(device)


define_prim(
    "next_seed(Device device) -> Tensor",
    "random",
    _next_seed_meta,
    _next_seed,
    tags=("nondeterministic_seeded", "impure"),
    notes="impure: a 0-dim int64 seed from the default generator (CUDA's on CUDA, else the CPU's)",
    check_reference=False,
)
