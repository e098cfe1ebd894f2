"""Pointwise math: aten unary/binary/comparison ops -> one elementwise prim, with promotion.

Each aten op here is a row in a table (aten packet, prim, promotion kind) and one generic
decomposition per arity; compound pointwise ops live in `pointwise.py`.
"""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
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

_INT_TO_FLOAT_UNARY = """
reciprocal sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh
tanh asinh acosh atanh sigmoid erf erfc erfinv lgamma digamma i0
special_i0e:i0e special_i1:i1 special_i1e:i1e special_ndtri:ndtri special_log_ndtr:log_ndtr
special_erfcx:erfcx special_bessel_j0:bessel_j0 special_bessel_j1:bessel_j1
special_bessel_y0:bessel_y0 special_bessel_y1:bessel_y1
special_modified_bessel_i0:modified_bessel_i0 special_modified_bessel_i1:modified_bessel_i1
special_modified_bessel_k0:modified_bessel_k0 special_modified_bessel_k1:modified_bessel_k1
special_scaled_modified_bessel_k0:scaled_modified_bessel_k0
special_scaled_modified_bessel_k1:scaled_modified_bessel_k1
special_spherical_bessel_j0:spherical_bessel_j0 special_airy_ai:airy_ai
"""
_SAME_DTYPE_UNARY = "neg bitwise_not"  # abs: below (complex in, real out)
_ROUNDING_UNARY = "ceil floor round trunc"  # identity on integers
_BOOL_UNARY = "isnan isinf isfinite signbit"

_DEFAULT_BINARY = """
add:add sub:sub mul:mul maximum:maximum minimum:minimum fmax:fmax fmin:fmin
remainder:remainder fmod:fmod floor_divide:floor_divide bitwise_and:bitwise_and
bitwise_or:bitwise_or bitwise_xor:bitwise_xor gcd:gcd lcm:lcm nextafter:nextafter
bitwise_left_shift:shift_left bitwise_right_shift:shift_right_arithmetic
"""
_INT_TO_FLOAT_BINARY = """
atan2 hypot copysign igamma igammac special_zeta:zeta
special_chebyshev_polynomial_t:chebyshev_polynomial_t
special_chebyshev_polynomial_u:chebyshev_polynomial_u
special_chebyshev_polynomial_v:chebyshev_polynomial_v
special_chebyshev_polynomial_w:chebyshev_polynomial_w
special_hermite_polynomial_h:hermite_polynomial_h
special_hermite_polynomial_he:hermite_polynomial_he
special_laguerre_polynomial_l:laguerre_polynomial_l
special_legendre_polynomial_p:legendre_polynomial_p
special_shifted_chebyshev_polynomial_t:shifted_chebyshev_polynomial_t
special_shifted_chebyshev_polynomial_u:shifted_chebyshev_polynomial_u
special_shifted_chebyshev_polynomial_v:shifted_chebyshev_polynomial_v
special_shifted_chebyshev_polynomial_w:shifted_chebyshev_polynomial_w
"""
_COMPARISONS = "eq ne lt le gt ge"


def _pairs(spec: str) -> list[tuple[str, str]]:
    out = []
    for item in spec.split():
        aten_name, _, prim_name = item.partition(":")
        out.append((aten_name, prim_name or aten_name))
    return out


def _packet_overloads(name: str, wanted: tuple[str, ...]) -> list:
    packet = getattr(aten, name)
    return [getattr(packet, o) for o in wanted if o in packet.overloads()]


def binary_operands(a, b, kind: Kind) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """Both operands as tensors of the computation dtype, plus the result dtype."""
    compute, result = elementwise_dtypes(a, b, kind=kind)
    if kind is Kind.DEFAULT or kind is Kind.INT_TO_FLOAT:
        compute = result  # one prim: the prim computes in the result dtype, like eager
    device = device_of(a, b)
    return as_tensor(a, compute, device), as_tensor(b, compute, device), result


def _register_unary(name: str, prim_name: str, kind: Kind) -> None:
    prim = getattr(prims, prim_name)

    def decomposition(a: torch.Tensor) -> torch.Tensor:
        _, result = elementwise_dtypes(a, kind=kind)
        return prim(convert(a, result))

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(*_packet_overloads(name, ("default",)))(decomposition)


def _register_rounding(name: str) -> None:
    prim = getattr(prims, name)

    def decomposition(a: torch.Tensor) -> torch.Tensor:
        return prims.clone(a) if is_integral(a.dtype) else prim(a)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(*_packet_overloads(name, ("default",)))(decomposition)


def _register_bool_unary(name: str) -> None:
    prim = getattr(prims, name)

    def decomposition(a: torch.Tensor) -> torch.Tensor:
        if is_integral(a.dtype) and name != "signbit":
            fill = name == "isfinite"
            return prims.full(list(a.shape), fill, dtype=torch.bool, device=a.device)
        if is_integral(a.dtype):
            a = convert(a, torch.get_default_dtype())
        return prim(a)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(*_packet_overloads(name, ("default",)))(decomposition)


def _register_binary(name: str, prim_name: str, kind: Kind) -> None:
    prim = getattr(prims, prim_name)

    def decomposition(a, b, *, alpha=None):
        x, y, result = binary_operands(a, b, kind)
        if alpha is not None and alpha != 1:
            y = prims.mul(y, as_tensor(alpha, y.dtype, y.device))
        return convert(prim(x, y), result)

    decomposition.__qualname__ = f"decompose_{name}"
    overloads = ("Tensor", "Scalar", "default", "Scalar_Tensor", "Tensor_Scalar")
    overloads += ("Tensor_Tensor", "x_scalar", "n_scalar", "self_scalar", "other_scalar")
    register_decomposition(*_packet_overloads(name, overloads))(decomposition)


def _register_comparison(name: str) -> None:
    prim = getattr(prims, name)

    def decomposition(a, b):
        x, y, _ = binary_operands(a, b, Kind.DEFAULT)
        return prim(x, y)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(*_packet_overloads(name, ("Tensor", "Scalar")))(decomposition)


for _name, _prim in _pairs(_INT_TO_FLOAT_UNARY):
    _register_unary(_name, _prim, Kind.INT_TO_FLOAT)
for _name, _prim in _pairs(_SAME_DTYPE_UNARY):
    _register_unary(_name, _prim, Kind.DEFAULT)
for _name in _ROUNDING_UNARY.split():
    _register_rounding(_name)
for _name in _BOOL_UNARY.split():
    _register_bool_unary(_name)
for _name, _prim in _pairs(_DEFAULT_BINARY):
    _register_binary(_name, _prim, Kind.DEFAULT)
for _name, _prim in _pairs(_INT_TO_FLOAT_BINARY):
    _register_binary(_name, _prim, Kind.INT_TO_FLOAT)
for _name in _COMPARISONS.split():
    _register_comparison(_name)


#: the scalar exponents eager's pow kernels compute with multiplies instead of libm's pow:
#: the same values, special ones included, and no pow call per element (GPT-2's tanh GELU
#: cubes its input, Llama's RMSNorm squares it). (Roots are left to pow: eager's CPU kernels
#: take sqrt for 0.5 in float32 but pow in float16, which differ at -0 and -inf.)
_POW_OF_EXPONENT = {
    2: lambda x: prims.mul(x, x),
    3: lambda x: prims.mul(prims.mul(x, x), x),
    -1: prims.reciprocal,
    -2: lambda x: prims.reciprocal(prims.mul(x, x)),
}


@register_decomposition(
    *_packet_overloads("pow", ("Tensor_Tensor", "Tensor_Scalar", "Scalar"))
)  # fmt: skip
def pow_(a, b):
    x, y, result = binary_operands(a, b, Kind.DEFAULT)
    exponent = b if isinstance(b, (int, float)) and not isinstance(b, bool) else None
    if isinstance(a, torch.Tensor) and x.dtype.is_floating_point and exponent in _POW_OF_EXPONENT:
        if x.dtype in (torch.bfloat16, torch.float16):  # eager's opmath: rounded once
            x = convert(x, torch.float32)
        return convert(_POW_OF_EXPONENT[exponent](x), result)
    return convert(prims.pow(x, y), result)


@register_decomposition(aten.div.Tensor, aten.div.Scalar)
def div(a, b):
    x, y, _ = binary_operands(a, b, Kind.INT_TO_FLOAT)
    return prims.div(x, y)


@register_decomposition(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return div(a, b)
    x, y, result = binary_operands(a, b, Kind.DEFAULT)
    if rounding_mode == "floor":
        return prims.floor_divide(x, y)
    if rounding_mode != "trunc":
        raise ValueError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
            f"but found '{rounding_mode}'"
        )
    if is_integral(result):
        return prims.div(x, y)  # integer prim division truncates
    return prims.trunc(prims.div(x, y))


@register_decomposition(aten.abs.default)
def abs_(a):
    if a.is_complex():  # |z| = hypot(re, im): real dtype, no overflow, as eager computes it
        parts = prims.view_as_real(a)
        last = parts.dim() - 1
        re, im = (prims.squeeze(_select_last(parts, k), [last]) for k in (0, 1))
        return prims.hypot(re, im)
    return prims.abs(a)


def _select_last(parts: torch.Tensor, k: int) -> torch.Tensor:
    start = [0] * parts.dim()
    limit = list(parts.shape)
    start[-1], limit[-1] = k, k + 1
    return prims.slice(parts, start, limit)


@register_decomposition(aten.sign.default, aten.sgn.default)
def sign(a):
    if a.dtype == torch.bool:
        return prims.clone(a)
    if a.is_complex():  # sgn (eager's sign refuses complex): z / |z|, and 0 at 0
        magnitude = abs_(a)
        unit = prims.div(a, convert(magnitude, a.dtype))
        zero = prims.scalar_tensor(0, dtype=magnitude.dtype, device=a.device)
        at_zero = prims.eq(magnitude, zero)
        return prims.where(at_zero, convert(zero, a.dtype), unit)
    return prims.sign(a)


@register_decomposition(aten.logical_not.default)
def logical_not(a):
    return prims.logical_not(truthy(a))


def truthy(a: torch.Tensor) -> torch.Tensor:
    """``a != 0`` as a bool tensor (a itself when already bool)."""
    if a.dtype == torch.bool:
        return a
    return prims.ne(a, prims.scalar_tensor(0, dtype=a.dtype, device=a.device))


def _register_logical(name: str) -> None:
    prim = getattr(prims, name)

    def decomposition(a, b):
        return prim(truthy(a), truthy(b))

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(getattr(aten, name).default)(decomposition)


for _name in ("logical_and", "logical_or", "logical_xor"):
    _register_logical(_name)
