"""Element-wise families, dtypes and creation ops through the Triton target (interpreter)."""

import pytest
import torch

from ember_primops import prims

FLOAT_UNARY = [
    "abs", "neg", "sign", "ceil", "floor", "round", "trunc", "reciprocal", "sqrt", "rsqrt",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf",
    "erfc", "erfinv", "lgamma", "isnan", "isinf", "isfinite", "signbit",
]  # fmt: skip
FLOAT_BINARY = [
    "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "hypot",
    "copysign", "nextafter", "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le",
    "gt", "ge",
]  # fmt: skip
INT_UNARY = ["abs", "neg", "sign", "bitwise_not", "signbit"]
INT_BINARY = [
    "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "maximum", "minimum",
    "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_arithmetic",
    "eq", "ne", "lt", "le", "gt", "ge",
]  # fmt: skip


def _specials(dtype):
    x = torch.randn(6, 9, dtype=dtype) * 3
    x[0, :5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0], dtype=dtype)
    x[1, :4] = torch.tensor([0.5, 1.5, -2.5, 0.9999], dtype=dtype)
    return x


def _all_of(names, arity):
    if arity == 1:
        return lambda a: tuple(getattr(prims, name)(a) for name in names)
    return lambda a, b: tuple(getattr(prims, name)(a, b) for name in names)


def test_pointwise_chain_of_ten_ops_is_one_kernel(check):
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN["pointwise_chain"]
    compiled = check(fn, *inputs())
    assert compiled.kernel_count == 1
    assert compiled.kernels[0].kind == "pointwise"
    assert "@triton.jit" in compiled.triton_source and "_k_k0_poi_" in compiled.wrapper_source


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_unary_family(check, dtype):
    check(_all_of(FLOAT_UNARY, 1), _specials(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_binary_family(check, dtype):
    a, b = _specials(dtype), torch.randn(6, 9, dtype=dtype) * 2
    b[0, 3] = 0.0
    check(_all_of(FLOAT_BINARY, 2), a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_floats_compute_in_float32(check, dtype):
    names = ["exp", "sin", "tanh", "sigmoid", "sqrt", "abs", "neg", "floor", "isnan", "log1p"]
    x = _specials(torch.float32).abs().to(dtype)
    y = torch.randn(6, 9).to(dtype)

    def f(a, b):
        out = [getattr(prims, n)(a) for n in names]
        out += [prims.add(prims.mul(a, b), b), prims.div(a, b), prims.maximum(a, b)]
        out.append(prims.convert_element_type(prims.mul(a, b), torch.float32))
        return tuple(out)

    compiled = check(f, x, y)
    assert ".to(tl.float32)" in compiled.triton_source


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_family(check, dtype):
    lo, hi = (0, 200) if dtype == torch.uint8 else (-100, 100)
    a = torch.randint(lo, hi, (5, 8), dtype=dtype)
    b = torch.randint(1, 7, (5, 8), dtype=dtype)
    names_u = INT_UNARY if dtype != torch.uint8 else ["bitwise_not", "signbit", "abs"]
    names_b = INT_BINARY if dtype != torch.uint8 else [n for n in INT_BINARY if "shift" not in n]

    def f(x, y):
        return _all_of(names_u, 1)(x) + _all_of(names_b, 2)(x, y)

    check(f, a, b)


def test_bool_family_and_where(check):
    a, b = torch.rand(4, 7) > 0.5, torch.rand(4, 7) > 0.3
    x, y = torch.randn(4, 7), torch.randn(4, 7)

    def f(p, q, u, v):
        return (
            prims.logical_and(p, q),
            prims.logical_or(p, q),
            prims.logical_xor(p, q),
            prims.logical_not(p),
            prims.bitwise_xor(p, q),
            prims.where(p, u, v),
            prims.eq(p, q),
            prims.convert_element_type(p, torch.float32),
            prims.convert_element_type(u, torch.bool),
        )

    check(f, a, b, x, y)


def test_conversions_and_bitcasts(check):
    x = torch.randn(4, 6) * 1e3
    x[0, :3] = torch.tensor([float("nan"), float("inf"), 3e10])

    def f(a):
        return (
            prims.convert_element_type(a, torch.int32),
            prims.convert_element_type(a, torch.float64),
            prims.convert_element_type(a, torch.bfloat16),
            prims.convert_element_type(a, torch.float16),
            prims.view_element_type(a, torch.int32),
            prims.convert_element_type(prims.convert_element_type(a, torch.int64), torch.float32),
        )

    x_finite = x.clone()
    x_finite[0, :3] = torch.tensor([1.5, -2.5, 3e5])  # float -> int of NaN/inf is undefined
    check(f, x_finite)


def test_creation_ops(check):
    cpu = torch.device("cpu")

    def f(a):
        full = prims.full([2, 3], 7.0, dtype=torch.float32, device=cpu)
        ramp = prims.iota(3, start=2, step=3, dtype=torch.float32, device=cpu)
        s = prims.scalar_tensor(0.5, dtype=torch.float32, device=cpu)
        ints = prims.iota(6, start=-4, step=2, dtype=torch.int64, device=cpu)
        return (prims.add(prims.add(a, full), prims.mul(ramp, s)), ints)

    check(f, torch.randn(2, 3))


def test_large_pointwise_uses_several_programs(check):
    x, y = torch.randn(3000), torch.randn(3000)
    compiled = check(lambda a, b: (prims.mul(prims.exp(a), prims.tanh(b)),), x, y)
    (kernel,) = compiled.kernels
    assert kernel.grid() == (3,) and kernel.config.XBLOCK == 1024
