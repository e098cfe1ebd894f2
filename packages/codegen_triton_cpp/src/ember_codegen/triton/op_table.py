"""Element-wise ``ops`` -> Triton expressions, one registry entry per op name.

Each entry takes the operand values (expression + torch dtype) and returns the expression
of the result; the result dtype follows the ops protocol (the operands', or bool for
comparisons, classification and logical ops). bfloat16/float16 values are float32 inside a
kernel, so their entries are the float ones. Functions Triton's core lacks (or has only as
fast approximations) come from ``libdevice``; under the interpreter the kernel module's
``libdevice`` is a numpy shim (interpreter_math.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember_codegen.op_registry import Emitter, infix, register_infix, registrar

from .dtypes import bit_width, compute_type, is_integer


@dataclass(frozen=True)
class TritonValue:
    """A value inside a kernel: an expression (usually a temporary) and its dtype."""

    expr: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return self.expr


TRITON_OPS: dict[str, Emitter] = {}
BOOL_RESULT_OPS: set[str] = set()


emits = registrar(TRITON_OPS, BOOL_RESULT_OPS)


def _is_float(v: TritonValue) -> bool:
    return v.dtype.is_floating_point


# --------------------------------------------------------------- unary math (floats)
def _libdevice(name: str) -> Emitter:
    return lambda x: f"libdevice.{name}({x})"


for _name in (
    "expm1", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma",
):  # fmt: skip
    TRITON_OPS[_name] = _libdevice(_name)
for _name in ("exp", "exp2", "log", "log2", "sqrt", "erf"):
    TRITON_OPS[_name] = (lambda n: lambda x: f"tl.{n}({x})")(_name)

TRITON_OPS["rsqrt"] = lambda x: f"(1.0 / tl.sqrt({x}))"
TRITON_OPS["reciprocal"] = lambda x: f"(1.0 / {x})"
TRITON_OPS["sigmoid"] = lambda x: f"(1.0 / (1.0 + tl.exp(-{x})))"


def _rounding(float_expr: str) -> Emitter:
    return lambda x: float_expr.format(x) if _is_float(x) else x.expr  # exact on integers


TRITON_OPS["floor"] = _rounding("tl.floor({})")
TRITON_OPS["ceil"] = _rounding("tl.ceil({})")
TRITON_OPS["trunc"] = _rounding("libdevice.trunc({})")
TRITON_OPS["round"] = _rounding("libdevice.nearbyint({})")  # half to even, like eager


@emits("abs")
def _abs(x: TritonValue) -> str:
    return x.expr if x.dtype == torch.bool else f"tl.abs({x})"


@emits("neg")
def _neg(x: TritonValue) -> str:
    return f"(-{x})"


@emits("sign")
def _sign(x: TritonValue) -> str:
    if x.dtype == torch.bool:
        return x.expr
    if x.dtype == torch.uint8:
        return f"({x} > 0).to(tl.uint8)"
    one, zero = ("1.0", "0.0") if _is_float(x) else ("1", "0")
    return (
        f"tl.where({x} > 0, {one}, tl.where({x} < 0, -{one}, {zero})).to({compute_type(x.dtype)})"
    )


# --------------------------------------------------------------- binary arithmetic
TRITON_OPS["sub"] = infix("-")
TRITON_OPS["truediv"] = lambda a, b: (
    f"tl.div_rn({a}, {b})" if a.dtype == torch.float32 or a.dtype in (torch.float16, torch.bfloat16)
    else f"({a} / {b})"
)  # fmt: skip


@emits("add")
def _add(a: TritonValue, b: TritonValue) -> str:
    return f"({a} | {b})" if a.dtype == torch.bool else f"({a} + {b})"


@emits("mul")
def _mul(a: TritonValue, b: TritonValue) -> str:
    return f"({a} & {b})" if a.dtype == torch.bool else f"({a} * {b})"


@emits("floordiv")
def _floordiv(a: TritonValue, b: TritonValue) -> str:
    if _is_float(a):
        return f"_em_float_floordiv({a}, {b})"
    return f"_em_int_floordiv({a}, {b})"


@emits("mod")
def _mod(a: TritonValue, b: TritonValue) -> str:
    if _is_float(a):
        return f"_em_float_mod({a}, {b})"
    return f"_em_int_mod({a}, {b})"


@emits("truncdiv")
def _truncdiv(a: TritonValue, b: TritonValue) -> str:
    return f"libdevice.trunc({a} / {b})" if _is_float(a) else f"({a} // {b})"


@emits("fmod")
def _fmod(a: TritonValue, b: TritonValue) -> str:
    return f"libdevice.fmod({a}, {b})" if _is_float(a) else f"({a} % {b})"


@emits("pow")
def _pow(a: TritonValue, b: TritonValue) -> str:
    return f"libdevice.pow({a}, {b})" if _is_float(a) else f"_em_int_pow({a}, {b})"


@emits("maximum")
def _maximum(a: TritonValue, b: TritonValue) -> str:
    if a.dtype == torch.bool:
        return f"({a} | {b})"
    return f"_em_maximum({a}, {b})"  # NaN propagates, like eager


@emits("minimum")
def _minimum(a: TritonValue, b: TritonValue) -> str:
    if a.dtype == torch.bool:
        return f"({a} & {b})"
    return f"_em_minimum({a}, {b})"


for _name in ("atan2", "hypot", "copysign", "nextafter"):
    TRITON_OPS[_name] = (lambda n: lambda a, b: f"libdevice.{n}({a}, {b})")(_name)


# --------------------------------------------------------------- comparisons -> bool
register_infix(emits)  # and bitwise and/or/xor: spelled alike in every target


@emits("isnan", to_bool=True)
def _isnan(x: TritonValue) -> str:
    return f"({x} != {x})" if _is_float(x) else "tl.full([], False, tl.int1)"


@emits("isinf", to_bool=True)
def _isinf(x: TritonValue) -> str:
    return f'(tl.abs({x}) == float("inf"))' if _is_float(x) else "tl.full([], False, tl.int1)"


@emits("signbit", to_bool=True)
def _signbit(x: TritonValue) -> str:
    if x.dtype == torch.float64:
        return f"({x}.to(tl.int64, bitcast=True) < 0)"
    if _is_float(x):
        return f"({x}.to(tl.int32, bitcast=True) < 0)"
    if x.dtype == torch.bool or x.dtype == torch.uint8:
        return "tl.full([], False, tl.int1)"
    return f"({x} < 0)"


# --------------------------------------------------------------- logical and bitwise
def _truth(v: TritonValue) -> str:
    return v.expr if v.dtype == torch.bool else f"({v} != 0)"


emits("logical_and", to_bool=True)(lambda a, b: f"({_truth(a)} & {_truth(b)})")
emits("logical_or", to_bool=True)(lambda a, b: f"({_truth(a)} | {_truth(b)})")
emits("logical_xor", to_bool=True)(lambda a, b: f"({_truth(a)} ^ {_truth(b)})")
emits("logical_not", to_bool=True)(lambda x: f"({x} == 0)" if x.dtype != torch.bool else f"(~{x})")
TRITON_OPS["bitwise_not"] = lambda x: f"({x} ^ 255)" if x.dtype == torch.uint8 else f"(~{x})"


@emits("shift_left")
def _shift_left(a: TritonValue, b: TritonValue) -> str:
    # eager: shifting by the width or more gives 0; in Triton (as in C) it is undefined
    bits = bit_width(a.dtype)
    return f"tl.where({b} < {bits}, {a} << tl.minimum({b}, {bits - 1}), 0)"


@emits("shift_right")
def _shift_right(a: TritonValue, b: TritonValue) -> str:
    bits = bit_width(a.dtype)
    fill = f"tl.where({a} < 0, -1, 0)" if a.dtype != torch.uint8 else "0"
    return f"tl.where({b} < {bits}, {a} >> tl.minimum({b}, {bits - 1}), {fill})"


def needs_int_check(name: str, dtype: torch.dtype) -> bool:
    """Integer division by zero: eager raises, a GPU kernel cannot (documented)."""
    return name in ("floordiv", "truncdiv", "mod", "fmod") and is_integer(dtype)
