"""Type promotion matching torch's rules (tensors with dims > 0-dim tensors > Python numbers).

Decompositions call `elementwise_dtypes` to get (computation dtype, result dtype) and
`as_tensor` to turn Python numbers into 0-dim tensors (elementwise prims take tensors only).
"""

from __future__ import annotations

import enum

import torch

from ember_primops._namespace import prims

_LOW_PRECISION = (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)

Number = bool | int | float | complex


class Kind(enum.Enum):
    """How an elementwise op maps the promoted dtype to its result dtype."""

    DEFAULT = "default"  # result = promoted dtype
    INT_TO_FLOAT = "int_to_float"  # bool/integer results become the default float dtype
    ALWAYS_BOOL = "always_bool"  # comparisons
    COMPLEX_TO_FLOAT = "complex_to_float"  # abs of complex is real
    BOOL_TO_LONG = "bool_to_long"  # sum/prod of bools


def _category(dtype: torch.dtype) -> int:
    if dtype == torch.bool:
        return 0
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 1


def _to_complex(dtype: torch.dtype) -> torch.dtype:
    return {torch.float64: torch.complex128, torch.float16: torch.complex32}.get(
        dtype, torch.complex64
    )


def _combine(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    # Mirrors the category rule: a lower-priority operand only matters if its category is higher.
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _category(higher), _category(lower)
    if ch == 3:
        return higher
    if cl == 3:
        return _to_complex(higher) if ch == 2 else lower
    if ch == 2:
        return higher
    if higher == torch.bool or cl == 2:
        return promote_types(higher, lower)
    return higher


_BITS = {
    torch.uint8: 8,
    torch.int8: 8,
    torch.int16: 16,
    torch.int32: 32,
    torch.int64: 64,
    torch.uint16: 16,
    torch.uint32: 32,
    torch.uint64: 64,
    torch.float16: 16,
    torch.bfloat16: 16,
    torch.float32: 32,
    torch.float64: 64,
    torch.complex32: 32,
    torch.complex64: 64,
    torch.complex128: 128,
}
_SIGNED_BY_BITS = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}
_FLOAT_BY_BITS = {16: torch.float16, 32: torch.float32, 64: torch.float64}
_COMPLEX_BY_REAL = {
    torch.float16: torch.complex32,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
    torch.bfloat16: torch.complex64,
}


def promote_types(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The smallest dtype both ``a`` and ``b`` convert to (torch's promotion lattice).

    Written out because ``torch.promote_types`` is itself an aten op (it would dispatch).
    """
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        high, low = (a, b) if ca > cb else (b, a)
        if _category(high) == 3 and _category(low) == 2:
            return _COMPLEX_BY_REAL[promote_types(high.to_real(), low)]
        return high
    if ca == 3:
        return a if _BITS[a] > _BITS[b] else b
    if ca == 2:
        if {a, b} == {torch.float16, torch.bfloat16}:
            return torch.float32
        return a if _BITS[a] > _BITS[b] else b
    signed_a, signed_b = a.is_signed, b.is_signed
    if signed_a == signed_b:
        return a if _BITS[a] > _BITS[b] else b
    signed, unsigned = (a, b) if signed_a else (b, a)
    if _BITS[signed] > _BITS[unsigned]:
        return signed
    if _BITS[unsigned] >= 64:
        raise TypeError(f"promotion of {a} and {b} is not defined")
    return _SIGNED_BY_BITS[_BITS[unsigned] * 2]


def _number_dtype(x: Number) -> torch.dtype:
    if isinstance(x, bool | torch.SymBool):
        return torch.bool
    if isinstance(x, int | torch.SymInt):  # a symbolic size promotes like the int it stands for
        return torch.int64
    if isinstance(x, float | torch.SymFloat):
        return torch.get_default_dtype()
    if isinstance(x, complex):
        return _to_complex(torch.get_default_dtype())
    raise TypeError(f"type promotion: unsupported operand {x!r} of type {type(x).__name__}")


def result_type(*args: torch.Tensor | Number | None) -> torch.dtype:
    """The dtype torch promotes ``args`` to (None entries are ignored)."""
    groups: list[torch.dtype | None] = [None, None, None]  # dims, zero-dim, numbers
    for a in args:
        if a is None:
            continue
        if isinstance(a, torch.Tensor):
            slot, dtype = (0 if a.dim() > 0 else 1), a.dtype
        else:
            slot, dtype = 2, _number_dtype(a)
        prev = groups[slot]
        groups[slot] = dtype if prev is None else promote_types(prev, dtype)
    result = _combine(groups[0], _combine(groups[1], groups[2]))
    if result is None:
        raise TypeError("type promotion needs at least one operand")
    return result


def computation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype to compute in: half-precision floats compute in float32 (like eager's opmath)."""
    if dtype in _LOW_PRECISION:
        return torch.float32
    if dtype == torch.complex32:
        return torch.complex64
    return dtype


def elementwise_dtypes(
    *args: torch.Tensor | Number | None, kind: Kind = Kind.DEFAULT
) -> tuple[torch.dtype, torch.dtype]:
    """(computation dtype, result dtype) of an elementwise op over ``args``."""
    promoted = result_type(*args)
    if kind is Kind.INT_TO_FLOAT and _category(promoted) < 2:
        promoted = torch.get_default_dtype()
    if kind is Kind.ALWAYS_BOOL:
        return computation_dtype(promoted), torch.bool
    if kind is Kind.BOOL_TO_LONG and _category(promoted) < 2:
        return torch.int64, torch.int64
    result = promoted
    if kind is Kind.COMPLEX_TO_FLOAT and promoted.is_complex:
        result = promoted.to_real()
    return computation_dtype(promoted), result


def is_integral(dtype: torch.dtype, include_bool: bool = True) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex) and (
        include_bool or dtype != torch.bool
    )


def device_of(*args: object) -> torch.device:
    """The device of the first tensor with dims, else of the first tensor, else CPU."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    for t in tensors:
        if t.dim() > 0:
            return t.device
    return tensors[0].device if tensors else torch.device("cpu")


def as_tensor(x: torch.Tensor | Number, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``x`` converted to ``dtype``; Python numbers become 0-dim tensors on ``device``."""
    if isinstance(x, torch.Tensor):
        return x if x.dtype == dtype else prims.convert_element_type(x, dtype)
    return prims.scalar_tensor(x, dtype=dtype, device=device)


def convert(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x if x.dtype == dtype else prims.convert_element_type(x, dtype)
