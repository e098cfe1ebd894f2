"""Element-wise ``ops`` -> C++ expressions, one registry entry per op name.

Each entry takes the operand values (C++ expression + torch dtype) and returns the C++
expression of the result; the result dtype follows the ops protocol (same as the operands,
or bool for comparisons/classification/logical ops). Values of bfloat16/float16 are float32
inside a kernel, so their entries are the float ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ember_codegen.op_registry import Emitter, infix, register_infix, registrar

from .dtypes import compute_type, cpp_literal, is_float, is_integer


@dataclass(frozen=True)
class CppValue:
    """A value inside a kernel: a C++ expression (usually a temporary) and its dtype."""

    expr: str
    dtype: torch.dtype
    #: the value, when it is a constant (ops.constant): lets an op specialize on it
    literal: bool | int | float | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return self.expr


#: op name -> emitter(*operands) -> C++ expression
CPP_OPS: dict[str, Emitter] = {}
#: ops whose result is bool whatever their operands
BOOL_RESULT_OPS: set[str] = set()
#: ops that may report an error through the runtime's error code (integer division by 0)
FALLIBLE_OPS = {"floordiv", "truncdiv", "mod", "fmod"}


emits = registrar(CPP_OPS, BOOL_RESULT_OPS)


def _std(name: str) -> Emitter:
    return lambda x: f"std::{name}({x})"


# --------------------------------------------------------------- unary math (floats)
for _name in (
    "sqrt", "exp2", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "erfc", "lgamma",
):  # fmt: skip
    CPP_OPS[_name] = _std(_name)


def _vector_math(name: str) -> Emitter:
    # ember_vmath.h: branch-free float32 versions that vectorize (float64 overloads call
    # libm); integer operands keep std::, whose integral overloads compute in double
    def emit(x: CppValue) -> str:
        return f"ember::{name}({x})" if is_float(x.dtype) else f"std::{name}({x})"

    return emit


for _name in ("log", "log1p", "expm1", "tanh", "erf"):
    CPP_OPS[_name] = _vector_math(_name)

for _name in ("exp", "sigmoid", "erfinv", "reciprocal", "rsqrt"):
    CPP_OPS[_name] = (lambda n: lambda x: f"ember::{n}({x})")(_name)


def _rounding(name: str, float_expr: str) -> Emitter:
    def emit(x: CppValue) -> str:
        return float_expr.format(x) if is_float(x.dtype) else x.expr  # exact on integers

    return emit


CPP_OPS["floor"] = _rounding("floor", "std::floor({})")
CPP_OPS["ceil"] = _rounding("ceil", "std::ceil({})")
CPP_OPS["trunc"] = _rounding("trunc", "std::trunc({})")
CPP_OPS["round"] = _rounding("round", "ember::round_half_even({})")


@emits("abs")
def _abs(x: CppValue) -> str:
    if is_float(x.dtype):
        return f"std::abs({x})"
    if is_integer(x.dtype):
        return f"({x} < 0 ? ember::wrapping_neg({x}) : {x})"
    return x.expr


@emits("neg")
def _neg(x: CppValue) -> str:
    return f"(-{x})" if is_float(x.dtype) else f"ember::wrapping_neg({x})"


@emits("sign")
def _sign(x: CppValue) -> str:
    return x.expr if x.dtype == torch.bool else f"ember::sign({x})"


# --------------------------------------------------------------- binary arithmetic
CPP_OPS["add"] = infix("+")
CPP_OPS["sub"] = infix("-")


@emits("truediv")
def _truediv(a: CppValue, b: CppValue) -> str:
    # x / 2^k is x * 2^-k exactly (both are x scaled by a power of two, rounded once), and
    # a multiply costs a fraction of a divide (attention's scores / sqrt(head_dim) = 8)
    literal = b.literal
    if is_float(a.dtype) and isinstance(literal, (int, float)) and not isinstance(literal, bool):
        mantissa, exponent = math.frexp(float(literal))
        if abs(mantissa) == 0.5 and abs(exponent) <= 64:  # 2^-64 is normal in every dtype
            return f"({a} * {cpp_literal(1.0 / float(literal), a.dtype)})"
    return f"({a} / {b})"


@emits("mul")
def _mul(a: CppValue, b: CppValue) -> str:
    return f"({a} && {b})" if a.dtype == torch.bool else f"({a} * {b})"


@emits("floordiv")
def _floordiv(a: CppValue, b: CppValue) -> str:
    return f"ember::floordiv<{compute_type(a.dtype)}>({a}, {b})"


@emits("mod")
def _mod(a: CppValue, b: CppValue) -> str:
    return f"ember::remainder<{compute_type(a.dtype)}>({a}, {b})"


@emits("truncdiv")
def _truncdiv(a: CppValue, b: CppValue) -> str:
    if is_float(a.dtype):
        return f"std::trunc({a} / {b})"
    return f"ember::truncdiv<{compute_type(a.dtype)}>({a}, {b})"


@emits("fmod")
def _fmod(a: CppValue, b: CppValue) -> str:
    if is_float(a.dtype):
        return f"std::fmod({a}, {b})"
    return f"ember::truncmod<{compute_type(a.dtype)}>({a}, {b})"


#: float powers by these constants as eager's CPU kernel computes them (it special-cases them
#: the same way): products vectorize where std::pow is a scalar libm call per element
_POW_BY_CONSTANT = {
    2.0: "({a} * {a})",
    3.0: "({a} * {a} * {a})",
    -1.0: "(1 / {a})",
}


@emits("pow")
def _pow(a: CppValue, b: CppValue) -> str:
    if is_float(a.dtype):
        special = _POW_BY_CONSTANT.get(b.literal) if is_float(b.dtype) else None
        if special is not None:
            return special.format(a=a)
        return f"std::pow({a}, {b})"
    return f"ember::ipow<{compute_type(a.dtype)}>({a}, {b})"


for _name in ("maximum", "minimum"):
    CPP_OPS[_name] = (lambda n: lambda a, b: f"ember::{n}({a}, {b})")(_name)
for _name in ("atan2", "hypot", "copysign", "nextafter"):
    CPP_OPS[_name] = (lambda n: lambda a, b: f"std::{n}({a}, {b})")(_name)


# --------------------------------------------------------------- comparisons -> bool
register_infix(emits)  # and bitwise and/or/xor: spelled alike in every target


def _classify(float_expr: str, int_expr: str) -> Emitter:
    def emit(x: CppValue) -> str:
        return (float_expr if is_float(x.dtype) else int_expr).format(x)

    return emit


emits("isnan", to_bool=True)(_classify("std::isnan({})", "false"))
emits("isinf", to_bool=True)(_classify("std::isinf({})", "false"))
emits("signbit", to_bool=True)(_classify("std::signbit({})", "({} < 0)"))


# --------------------------------------------------------------- logical and bitwise
emits("logical_and", to_bool=True)(
    lambda a, b: f"(static_cast<bool>({a}) && static_cast<bool>({b}))"
)
emits("logical_or", to_bool=True)(
    lambda a, b: f"(static_cast<bool>({a}) || static_cast<bool>({b}))"
)
emits("logical_xor", to_bool=True)(
    lambda a, b: f"(static_cast<bool>({a}) != static_cast<bool>({b}))"
)
emits("logical_not", to_bool=True)(lambda x: f"(!static_cast<bool>({x}))")


@emits("bitwise_not")
def _bitwise_not(x: CppValue) -> str:
    return f"(!{x})" if x.dtype == torch.bool else f"(~{x})"


@emits("shift_left")
def _shift_left(a: CppValue, b: CppValue) -> str:
    return f"ember::shift_left<{compute_type(a.dtype)}>({a}, {b})"


@emits("shift_right")
def _shift_right(a: CppValue, b: CppValue) -> str:
    return f"ember::shift_right<{compute_type(a.dtype)}>({a}, {b})"
