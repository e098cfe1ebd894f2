"""Unary elementwise prims, table-driven: name -> (reference, dtype class, eager op, notes).

The reference implementations call the aten op; the shared meta rule restricts dtypes so that the
aten op never promotes (e.g. ``sqrt`` takes floating/complex tensors only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ._elementwise import OutDtype, bool_dtype, elementwise_meta, real_of, same_dtype
from ._registry import define_prim, fail

sp = torch.special


class Unary(NamedTuple):
    reference: Callable
    dtype_class: str
    eager: Callable | str | None = "reference"  # None: no eager counterpart
    out_dtype: OutDtype = same_dtype
    notes: str = ""


def _cbrt(a: torch.Tensor) -> torch.Tensor:
    return torch.sign(a) * torch.abs(a).pow(1.0 / 3.0)


def _conj_physical(a: torch.Tensor) -> torch.Tensor:
    # aten returns the input itself for real dtypes; prims never alias.
    return torch.conj_physical(a) if a.is_complex() else a.clone()


def _sinc(a: torch.Tensor) -> torch.Tensor:
    return torch.sinc(a)


UNARY: dict[str, Unary] = {
    "abs": Unary(torch.abs, "real", notes="integers wrap like eager (abs(INT_MIN) = INT_MIN)"),
    "neg": Unary(torch.neg, "number"),
    "sign": Unary(torch.sign, "real"),
    "ceil": Unary(torch.ceil, "real"),
    "floor": Unary(torch.floor, "real"),
    "round": Unary(torch.round, "real", notes="half to even"),
    "trunc": Unary(torch.trunc, "real"),
    "frac": Unary(torch.frac, "float", notes="a - trunc(a)"),
    "reciprocal": Unary(torch.reciprocal, "float_complex"),
    "sqrt": Unary(torch.sqrt, "float_complex"),
    "rsqrt": Unary(torch.rsqrt, "float_complex"),
    "cbrt": Unary(_cbrt, "float", eager=None, notes="real cube root (negative inputs allowed)"),
    "exp": Unary(torch.exp, "float_complex"),
    "exp2": Unary(torch.exp2, "float"),
    "expm1": Unary(torch.expm1, "float_complex"),
    "log": Unary(torch.log, "float_complex"),
    "log2": Unary(torch.log2, "float_complex"),
    "log10": Unary(torch.log10, "float_complex"),
    "log1p": Unary(torch.log1p, "float_complex"),
    "sin": Unary(torch.sin, "float_complex"),
    "cos": Unary(torch.cos, "float_complex"),
    "tan": Unary(torch.tan, "float_complex"),
    "asin": Unary(torch.asin, "float_complex"),
    "acos": Unary(torch.acos, "float_complex"),
    "atan": Unary(torch.atan, "float_complex"),
    "sinh": Unary(torch.sinh, "float_complex"),
    "cosh": Unary(torch.cosh, "float_complex"),
    "tanh": Unary(torch.tanh, "float_complex"),
    "asinh": Unary(torch.asinh, "float_complex"),
    "acosh": Unary(torch.acosh, "float_complex"),
    "atanh": Unary(torch.atanh, "float_complex"),
    "sigmoid": Unary(torch.sigmoid, "float_complex"),
    "sinc": Unary(_sinc, "float", eager=torch.sinc, notes="sin(pi a)/(pi a), 1 at 0"),
    "erf": Unary(torch.erf, "float"),
    "erfc": Unary(torch.erfc, "float"),
    "erfinv": Unary(torch.erfinv, "float"),
    "erfcx": Unary(sp.erfcx, "float"),
    "lgamma": Unary(torch.lgamma, "float"),
    "digamma": Unary(torch.digamma, "float"),
    "i0": Unary(torch.i0, "float"),
    "i0e": Unary(sp.i0e, "float"),
    "i1": Unary(sp.i1, "float"),
    "i1e": Unary(sp.i1e, "float"),
    "ndtri": Unary(sp.ndtri, "float"),
    "log_ndtr": Unary(sp.log_ndtr, "float"),
    "bessel_j0": Unary(sp.bessel_j0, "float"),
    "bessel_j1": Unary(sp.bessel_j1, "float"),
    "bessel_y0": Unary(sp.bessel_y0, "float"),
    "bessel_y1": Unary(sp.bessel_y1, "float"),
    "modified_bessel_i0": Unary(sp.modified_bessel_i0, "float"),
    "modified_bessel_i1": Unary(sp.modified_bessel_i1, "float"),
    "modified_bessel_k0": Unary(sp.modified_bessel_k0, "float"),
    "modified_bessel_k1": Unary(sp.modified_bessel_k1, "float"),
    "scaled_modified_bessel_k0": Unary(sp.scaled_modified_bessel_k0, "float"),
    "scaled_modified_bessel_k1": Unary(sp.scaled_modified_bessel_k1, "float"),
    "spherical_bessel_j0": Unary(sp.spherical_bessel_j0, "float"),
    "airy_ai": Unary(sp.airy_ai, "float"),
    "bitwise_not": Unary(torch.bitwise_not, "integer_bool"),
    "logical_not": Unary(torch.logical_not, "any", out_dtype=bool_dtype, notes="-> bool"),
    "conj_physical": Unary(
        _conj_physical, "any", eager=torch.conj_physical, notes="copy for real dtypes"
    ),
    "angle": Unary(torch.angle, "float_complex", out_dtype=real_of, notes="complex -> real"),
    "isnan": Unary(torch.isnan, "any", out_dtype=bool_dtype, notes="-> bool"),
    "isinf": Unary(torch.isinf, "any", out_dtype=bool_dtype, notes="-> bool"),
    "isfinite": Unary(torch.isfinite, "any", out_dtype=bool_dtype, notes="-> bool"),
    "signbit": Unary(torch.signbit, "real", out_dtype=bool_dtype, notes="-> bool"),
}


def _define_unary(name: str, spec: Unary) -> None:
    def meta(a):
        return elementwise_meta(name, [a], spec.dtype_class, spec.out_dtype)

    reference = spec.reference
    eager = reference if spec.eager == "reference" else spec.eager
    define_prim(
        f"{name}(Tensor a) -> Tensor",
        "unary",
        meta,
        lambda a: reference(a),
        tags=("pointwise",),
        notes=spec.notes or f"takes {spec.dtype_class}",
        eager=eager,
    )


for _name, _spec in UNARY.items():
    _define_unary(_name, _spec)


# Unary prims with an integer attribute.
def _round_decimals_meta(a, decimals):
    return elementwise_meta("round_decimals", [a], "float")


define_prim(
    "round_decimals(Tensor a, int decimals) -> Tensor",
    "unary",
    _round_decimals_meta,
    lambda a, decimals: torch.round(a, decimals=decimals),
    tags=("pointwise",),
    notes="round half to even at 10**-decimals",
    eager=lambda a, decimals: torch.round(a, decimals=decimals),
)


def _polygamma_meta(a, n):
    if n < 0:
        fail("polygamma", f"order n must be >= 0, got {n}")
    return elementwise_meta("polygamma", [a], "float")


define_prim(
    "polygamma(Tensor a, int n) -> Tensor",
    "unary",
    _polygamma_meta,
    lambda a, n: torch.polygamma(n, a),
    tags=("pointwise",),
    notes="n-th derivative of digamma",
    eager=lambda a, n: torch.polygamma(n, a),
)
