"""Per-lowering correctness of the element-wise prims, through the interpreter, vs eager."""

import pytest
import torch

from ember_inductor_ir.ops import UNARY_MATH_OPS
from ember_primops import prims

# every unary math op of the loop IR is a prim of the same name, plus the bool-valued ones
UNARY_FLOAT = [*UNARY_MATH_OPS, "isnan", "isinf", "isfinite", "signbit", "logical_not"]
BINARY_FLOAT = [
    "add",
    "sub",
    "mul",
    "div",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "atan2",
    "hypot",
    "copysign",
    "nextafter",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
]
BINARY_INT = [
    "add",
    "sub",
    "mul",
    "div",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "maximum",
    "minimum",
    "remainder",
]


def _unit(shape):
    return torch.rand(shape) * 0.9 + 0.05  # inside every function's domain but acosh's


@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_unary_float(check, name):
    op = getattr(prims, name)
    x = _unit((3, 5)) + (1.0 if name == "acosh" else 0.0)
    x[0, 0] = float("nan") if name.startswith("is") else x[0, 0]
    check(lambda a: (op(a),), x)


@pytest.mark.parametrize("name", BINARY_FLOAT)
def test_binary_float_broadcast(check, name):
    op = getattr(prims, name)
    a, b = torch.randn(4, 1, 6), torch.randn(5, 1) + 2.0
    check(lambda x, y: (op(x, y),), a, b)


@pytest.mark.parametrize("name", BINARY_INT)
def test_binary_int(check, name):
    op = getattr(prims, name)
    a = torch.randint(-20, 20, (4, 6))
    b = torch.randint(1, 7, (4, 6)) * torch.where(torch.rand(4, 6) > 0.5, 1, -1)
    check(lambda x, y: (op(x, y),), a, b)


def test_shifts_and_bitwise_not(check):
    a, b = torch.randint(-100, 100, (8,)), torch.randint(0, 5, (8,))
    check(
        lambda x, y: (
            prims.shift_left(x, y),
            prims.shift_right_arithmetic(x, y),
            prims.bitwise_not(x),
        ),
        a,
        b,
    )


def test_where_and_convert(check):
    x, y = torch.randn(3, 4), torch.randn(3, 4)

    def f(a, b):
        c = prims.convert_element_type(prims.gt(a, b), torch.float32)
        return (prims.where(prims.lt(a, b), a, b), c, prims.convert_element_type(a, torch.int32))

    check(f, x, y)


def test_zero_dim_cpu_scalar_with_tensor(check):
    x = torch.randn(3, 4)
    s = torch.tensor(2.5)
    check(lambda a, b: (prims.mul(a, b),), x, s)


def test_half_precision_matches_eager(check):
    x = torch.randn(4, 4, dtype=torch.float16)
    check(lambda a: (prims.mul(prims.exp(a), a),), x, atol=1e-3, rtol=1e-3)
