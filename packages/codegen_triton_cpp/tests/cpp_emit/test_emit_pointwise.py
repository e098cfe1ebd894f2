"""Element-wise families end to end (prim graph -> lower -> schedule -> C++ -> eager check),
one compiled graph per dtype so that every op of a family costs one compile."""

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

    check(f, x, y)


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
            prims.convert_element_type(a, torch.int64),
            prims.convert_element_type(a, torch.int32),
            prims.convert_element_type(a, torch.float64),
            prims.convert_element_type(a, torch.bfloat16),
            prims.convert_element_type(a, torch.float16),
            prims.view_element_type(a, torch.int32),
            prims.convert_element_type(prims.convert_element_type(a, torch.int64), torch.float32),
        )

    check(f, x)


def test_integer_division_by_zero_raises_like_eager(compile_prims):
    from ember_codegen import KernelRuntimeError

    a, b = torch.tensor([4, 5, 6]), torch.tensor([1, 0, 2])
    _, compiled = compile_prims(lambda x, y: (prims.floor_divide(x, y),), a, b)
    with pytest.raises(KernelRuntimeError, match="ZeroDivisionError"):
        compiled([a, b])
    assert compiled([a, torch.tensor([1, 2, 3])])[0].tolist() == [4, 2, 2]


def test_creation_ops(check):
    cpu = torch.device("cpu")

    def f(a):
        full = prims.full([2, 3], 7.0, dtype=torch.float32, device=cpu)
        ramp = prims.iota(3, start=2, step=3, dtype=torch.float32, device=cpu)
        s = prims.scalar_tensor(0.5, dtype=torch.float32, device=cpu)
        ints = prims.iota(6, start=-4, step=2, dtype=torch.int64, device=cpu)
        return (prims.add(prims.add(a, full), prims.mul(ramp, s)), ints)

    check(f, torch.randn(2, 3))


@pytest.mark.parametrize(
    ("shape", "pragma"),
    [
        ((4, 3, 4096), "#pragma omp parallel for collapse(2)"),  # innermost stays serial
        ((256, 300), "#pragma omp parallel for\n"),
        ((100000,), "#pragma omp parallel for simd\n"),
    ],
)
def test_large_pointwise_kernels_run_in_parallel(check, shape, pragma):
    x, y = torch.randn(*shape), torch.randn(*shape)
    _, compiled = check(lambda a, b: (prims.mul(prims.exp(a), prims.tanh(b)),), x, y)
    assert compiled.kernels[0].mode == "outer"
    assert pragma in compiled.cpp_source


def _divided_by_literal(divisor: float, builder, x: torch.Tensor):
    """Compile ``x / divisor`` with the divisor a scalar_tensor node, as AOT graphs have it
    (symbolic tracing would store it as a tensor constant); returns the C++ source."""
    from prim_helpers import _MetaPass

    from ember_codegen import compile_graph
    from ember_inductor_ir import lower, schedule

    graph = torch.fx.Graph()
    a = graph.placeholder("a")
    scalar = graph.call_function(
        prims.scalar_tensor, (divisor,), {"dtype": torch.float32, "device": torch.device("cpu")}
    )
    graph.output((graph.call_function(prims.div, (a, scalar)),))
    gm = torch.fx.GraphModule({}, graph)
    _MetaPass(gm).run(x)
    compiled = compile_graph(schedule(lower(gm, [x])), builder=builder)
    (got,) = compiled([x])
    torch.testing.assert_close(got, x / divisor, atol=0, rtol=0)
    return compiled.cpp_source.split("EMBER_KERNEL")[1]


@pytest.mark.parametrize("divisor", [8.0, 0.25, -2.0, 2.0**-60])
def test_division_by_a_power_of_two_is_an_exact_multiply(builder, divisor):
    # attention scores / sqrt(64): a multiply by 2^-k gives the division's bits, faster
    x = torch.randn(64, 40) * torch.logspace(-30, 30, 40)
    assert " / " not in _divided_by_literal(divisor, builder, x)


def test_division_by_other_constants_stays_a_division(builder):
    assert " / " in _divided_by_literal(3.0, builder, torch.randn(64, 40))


def test_pointwise_inner_loop_is_vectorized_by_request(check):
    """g++ left scalar a select between a load at a divided index and a constant (a
    max-pool gradient's shape); a pointwise kernel's innermost loop carries ``omp simd``."""
    cpu = torch.device("cpu")

    def f(g, keep):
        spread = prims.reshape(prims.broadcast_in_dim(g, [8, 32, 2, 32, 2], [0, 1, 3]), [8, 64, 64])
        zero = prims.scalar_tensor(0.0, dtype=torch.float32, device=cpu)
        return (prims.where(keep, spread, zero),)

    g, keep = torch.randn(8, 32, 32), torch.rand(8, 64, 64) > 0.5
    _, compiled = check(f, g, keep, atol=0, rtol=0)
    lines = compiled.cpp_source.splitlines()
    inner = next(k for k, line in enumerate(lines) if "< 64; ++i2)" in line)
    assert lines[inner - 1].strip() == "#pragma omp simd", "\n".join(lines)
