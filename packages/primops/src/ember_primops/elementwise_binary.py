"""Binary elementwise prims, comparisons and the two ternary prims, table-driven.

All tensor arguments share one dtype (the decompositions insert conversions); shapes broadcast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ._elementwise import OutDtype, bool_dtype, complex_of, elementwise_meta, same_dtype
from ._registry import define_prim

sp = torch.special


class Binary(NamedTuple):
    reference: Callable
    dtype_class: str
    out_dtype: OutDtype = same_dtype
    notes: str = ""
    eager: Callable | str | None = "reference"


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


def _shift_right_logical(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Shift in zeros: arithmetic shift, then clear the copies of the sign bit. Shifts outside
    # [0, bits) give 0. The mask (1 << (bits - b)) - 1 is computed without overflow.
    bits = torch.iinfo(a.dtype).bits
    if a.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        shifted = torch.bitwise_right_shift(a, b)
        return torch.where((b >= 0) & (b < bits), shifted, torch.zeros_like(shifted))
    in_range = (b >= 0) & (b < bits)
    safe_b = torch.where(in_range, b, torch.zeros_like(b))
    shifted = torch.bitwise_right_shift(a, safe_b)
    keep = bits - safe_b  # number of low bits to keep, 1..bits
    one = torch.ones_like(keep)
    half = torch.bitwise_left_shift(one, keep - 1)  # 2**(keep-1), may be the sign bit
    mask = (half - 1) | half  # all ones in the low `keep` bits
    out = shifted & mask
    return torch.where(in_range, out, torch.zeros_like(out))


def _poly(fn: Callable) -> Binary:
    return Binary(fn, "float", notes="(x, n): n is a tensor of x's dtype")


BINARY: dict[str, Binary] = {
    "add": Binary(torch.add, "any"),
    "sub": Binary(torch.sub, "number"),
    "mul": Binary(torch.mul, "any"),
    "div": Binary(_div, "number", notes="floats: true division; integers: truncation"),
    "floor_divide": Binary(torch.floor_divide, "real"),
    "remainder": Binary(torch.remainder, "real", notes="sign of the divisor (Python)"),
    "fmod": Binary(torch.fmod, "real", notes="sign of the dividend (C)"),
    "pow": Binary(torch.pow, "number"),
    "atan2": Binary(torch.atan2, "float"),
    "hypot": Binary(torch.hypot, "float"),
    "copysign": Binary(torch.copysign, "float"),
    "nextafter": Binary(torch.nextafter, "float"),
    "maximum": Binary(torch.maximum, "real_bool", notes="propagates NaN"),
    "minimum": Binary(torch.minimum, "real_bool", notes="propagates NaN"),
    "fmax": Binary(torch.fmax, "real", notes="ignores NaN"),
    "fmin": Binary(torch.fmin, "real", notes="ignores NaN"),
    "igamma": Binary(torch.igamma, "float"),
    "igammac": Binary(torch.igammac, "float"),
    "zeta": Binary(sp.zeta, "float", notes="Hurwitz zeta(x, q)"),
    "xlogy": Binary(torch.xlogy, "float", notes="0 where x == 0 (unless y is NaN)"),
    "xlog1py": Binary(sp.xlog1py, "float", notes="0 where x == 0 (unless y is NaN)"),
    "logaddexp": Binary(torch.logaddexp, "float"),
    "logaddexp2": Binary(torch.logaddexp2, "float"),
    "gcd": Binary(torch.gcd, "integer"),
    "lcm": Binary(torch.lcm, "integer"),
    "bitwise_and": Binary(torch.bitwise_and, "integer_bool"),
    "bitwise_or": Binary(torch.bitwise_or, "integer_bool"),
    "bitwise_xor": Binary(torch.bitwise_xor, "integer_bool"),
    "shift_left": Binary(torch.bitwise_left_shift, "integer"),
    "shift_right_arithmetic": Binary(torch.bitwise_right_shift, "integer"),
    "shift_right_logical": Binary(
        _shift_right_logical,
        "integer",
        notes="zeros shifted in; shifts outside [0, bits) give 0",
        eager=None,
    ),
    "logical_and": Binary(torch.logical_and, "any", bool_dtype, "-> bool"),
    "logical_or": Binary(torch.logical_or, "any", bool_dtype, "-> bool"),
    "logical_xor": Binary(torch.logical_xor, "any", bool_dtype, "-> bool"),
    "complex": Binary(torch.complex, "float32_64", complex_of, "(real, imag) -> complex"),
    "chebyshev_polynomial_t": _poly(sp.chebyshev_polynomial_t),
    "chebyshev_polynomial_u": _poly(sp.chebyshev_polynomial_u),
    "chebyshev_polynomial_v": _poly(sp.chebyshev_polynomial_v),
    "chebyshev_polynomial_w": _poly(sp.chebyshev_polynomial_w),
    "hermite_polynomial_h": _poly(sp.hermite_polynomial_h),
    "hermite_polynomial_he": _poly(sp.hermite_polynomial_he),
    "laguerre_polynomial_l": _poly(sp.laguerre_polynomial_l),
    "legendre_polynomial_p": _poly(sp.legendre_polynomial_p),
    "shifted_chebyshev_polynomial_t": _poly(sp.shifted_chebyshev_polynomial_t),
    "shifted_chebyshev_polynomial_u": _poly(sp.shifted_chebyshev_polynomial_u),
    "shifted_chebyshev_polynomial_v": _poly(sp.shifted_chebyshev_polynomial_v),
    "shifted_chebyshev_polynomial_w": _poly(sp.shifted_chebyshev_polynomial_w),
}

COMPARISON: dict[str, Binary] = {
    "eq": Binary(torch.eq, "any", bool_dtype),
    "ne": Binary(torch.ne, "any", bool_dtype),
    "lt": Binary(torch.lt, "real_bool", bool_dtype),
    "le": Binary(torch.le, "real_bool", bool_dtype),
    "gt": Binary(torch.gt, "real_bool", bool_dtype),
    "ge": Binary(torch.ge, "real_bool", bool_dtype),
}


def _define_binary(name: str, spec: Binary, category: str) -> None:
    def meta(a, b):
        return elementwise_meta(name, [a, b], spec.dtype_class, spec.out_dtype)

    reference = spec.reference
    define_prim(
        f"{name}(Tensor a, Tensor b) -> Tensor",
        category,
        meta,
        lambda a, b: reference(a, b),
        tags=("pointwise",),
        notes=spec.notes
        or f"takes {spec.dtype_class}" + (" -> bool" if category == "comparison" else ""),
        eager=reference if spec.eager == "reference" else spec.eager,
    )


for _name, _spec in BINARY.items():
    _define_binary(_name, _spec, "binary")
for _name, _spec in COMPARISON.items():
    _define_binary(_name, _spec, "comparison")


def _where_meta(pred, a, b):
    return elementwise_meta("where", [a, b], "any", predicate=pred)


define_prim(
    "where(Tensor pred, Tensor a, Tensor b) -> Tensor",
    "ternary",
    _where_meta,
    lambda pred, a, b: torch.where(pred, a, b),
    tags=("pointwise",),
    notes="pred is bool; a and b share a dtype",
    eager=torch.where,
)


def _fma_meta(a, b, c):
    return elementwise_meta("fma", [a, b, c], "float")


def _fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    # Below float64 the product and sum are formed in float64 (exact product, one extra rounding).
    if a.dtype != torch.float64:
        return torch.addcmul(c.double(), a.double(), b.double()).to(a.dtype)
    return torch.addcmul(c, a, b)


define_prim(
    "fma(Tensor a, Tensor b, Tensor c) -> Tensor",
    "ternary",
    _fma_meta,
    _fma,
    tags=("pointwise",),
    notes="a * b + c; reference forms it in float64",
    eager=lambda a, b, c: torch.addcmul(c, a, b),
)
