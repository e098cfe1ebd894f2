"""C++ types of torch dtypes: how a dtype is stored, computed with, loaded and stored.

bfloat16 and float16 are stored as their uint16_t bit patterns and computed in float32
(converted on load and store, and rounded where a body converts to them explicitly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# the lookup and its error (UnsupportedDtypeError) are the same for every target
from ember_codegen.dtype_support import is_integer, target_type


@dataclass(frozen=True)
class CppType:
    storage: str  # the element type of a buffer of this dtype
    compute: str  # the type of values of this dtype inside a kernel
    load: str = "{}"  # storage expression -> compute expression
    store: str = "{}"  # compute expression -> storage expression


_REDUCED = {
    torch.bfloat16: CppType(
        "uint16_t", "float", "ember::bf16_to_float({})", "ember::float_to_bf16({})"
    ),
    torch.float16: CppType(
        "uint16_t", "float", "ember::half_to_float({})", "ember::float_to_half({})"
    ),
}
_PLAIN = {
    torch.float32: "float",
    torch.float64: "double",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.uint8: "uint8_t",
}
CPP_TYPES: dict[torch.dtype, CppType] = {
    **{dtype: CppType(name, name) for dtype, name in _PLAIN.items()},
    **_REDUCED,
    # bool buffers are read as bytes: GCC has no vector type for `bool` loads, so a bool
    # mask in a loop (attention masks) kept the whole loop scalar; torch stores 0/1 bytes
    torch.bool: CppType("uint8_t", "bool", "({} != 0)", "static_cast<uint8_t>({})"),
}


def cpp_type(dtype: torch.dtype) -> CppType:
    return target_type(CPP_TYPES, dtype, "C++")


def compute_type(dtype: torch.dtype) -> str:
    return cpp_type(dtype).compute


def is_reduced_float(dtype: torch.dtype) -> bool:
    return dtype in _REDUCED


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def cpp_literal(value: bool | int | float, dtype: torch.dtype) -> str:
    """A C++ expression of ``dtype``'s compute type holding ``value`` as eager would."""
    ctype = compute_type(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if is_integer(dtype):
        number = int(value)
        if number == -(2**63):
            return "static_cast<int64_t>(INT64_MIN)"
        return f"static_cast<{ctype}>({number}LL)"
    number = float(value)
    if is_reduced_float(dtype):  # the constant eager would see: rounded to the narrow type
        number = torch.tensor(number, dtype=dtype).item()
    if math.isnan(number):
        return f"static_cast<{ctype}>(NAN)"
    if math.isinf(number):
        return f"static_cast<{ctype}>({'-' if number < 0 else ''}INFINITY)"
    return f"static_cast<{ctype}>({number.hex()})"  # hex literals are exact
