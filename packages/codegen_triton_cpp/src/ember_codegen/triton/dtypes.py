"""Triton types of torch dtypes: the element type of a buffer and the type values of that
dtype have inside a kernel (bfloat16 / float16 are loaded into float32 and computed there,
rounded back on store and where a body converts to them explicitly)."""

from __future__ import annotations

import math

import torch

# the lookup and its error (UnsupportedDtypeError) are the same for every target
from ember_codegen.dtype_support import is_integer, target_type
from ember_codegen.triton.cache import interpreter_source

TRITON_TYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}
REDUCED_FLOATS = (torch.float16, torch.bfloat16)
#: integer types narrower than 32 bits: Triton promotes them in arithmetic, so results are
#: cast back to keep each value's dtype what the ops protocol says
NARROW_INTS = (torch.int8, torch.int16, torch.uint8)


def triton_type(dtype: torch.dtype) -> str:
    return target_type(TRITON_TYPES, dtype, "Triton")


def compute_type(dtype: torch.dtype) -> str:
    """The type a value of ``dtype`` has in a kernel."""
    return "tl.float32" if dtype in REDUCED_FLOATS else triton_type(dtype)


def is_reduced_float(dtype: torch.dtype) -> bool:
    return dtype in REDUCED_FLOATS


def bit_width(dtype: torch.dtype) -> int:
    return torch.iinfo(dtype).bits if is_integer(dtype) else 32


def python_literal(value: bool | int | float, dtype: torch.dtype) -> str:
    """Python source of ``value`` as eager would hold it in ``dtype`` (a plain literal)."""
    if dtype == torch.bool:
        return "True" if value else "False"
    if is_integer(dtype):
        return str(int(value))
    number = float(value)
    if is_reduced_float(dtype):  # the constant eager sees: rounded to the narrow type
        number = torch.tensor(number, dtype=dtype).item()
    if math.isnan(number):
        return 'float("nan")'
    if math.isinf(number):
        return f'float("{"-" if number < 0 else ""}inf")'
    return repr(number)


def triton_constant(value: bool | int | float, dtype: torch.dtype) -> str:
    """A 0-d Triton tensor of ``dtype``'s compute type holding ``value``."""
    return f"tl.full([], {python_literal(value, dtype)}, {compute_type(dtype)})"


def round_to(expr: str, dtype: torch.dtype) -> str:
    """A float32 expression rounded to the reduced float ``dtype`` (kept as float32)."""
    if dtype == torch.bfloat16 and _interpreting():
        return f"_em_round_bf16({expr})"
    return f"{expr}.to({triton_type(dtype)}).to(tl.float32)"


def store_cast(expr: str, dtype: torch.dtype) -> str:
    """A compute value as the element type of a ``dtype`` buffer."""
    if dtype == torch.bfloat16 and _interpreting():
        return f"_em_round_bf16({expr}).to(tl.bfloat16)"
    return f"{expr}.to({triton_type(dtype)})"


def _interpreting() -> bool:
    # the GPU's float32 -> bfloat16 conversion rounds to nearest even in one instruction; the
    # CPU interpreter's truncates, so there the rounding is done with integer arithmetic
    return interpreter_source()
