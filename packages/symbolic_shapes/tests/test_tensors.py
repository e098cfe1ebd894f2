"""Ops on meta and fake tensors with symbolic sizes: the resulting symbolic shapes, once
the symbols are bound to another input's sizes, match eager on that input; each op's
guards are the ones its size checks need, and they pass or fail as eager shapes demand."""

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch._dispatch.python import enable_python_dispatcher

from ember_symbolic import ShapeEnv, compile_guards, failure_reason
from ember_symbolic.tensors import Dim, DimDynamic, fake_mode, fake_tensor, meta_tensor


def _weight(x, *shape):
    return torch.ones(*shape, device=x.device)


# name -> (function, guards beyond sizes/strides that the op adds on x of shape (5, 8))
OPS = {
    "matmul": (lambda x: x @ _weight(x, 8, 16), ["Eq(s1, 8)"]),
    "relu": (torch.relu, []),
    "sum": (lambda x: x.sum(0), []),
    # torch's view algorithm asks whether the merged dims split evenly and where
    "view": (
        lambda x: x.view(-1, 4),
        ["Eq(Mod(s0*s1, 4), 0)", "Ne(s0, s0*s1/4)", "Ne(s0*(Mod(1, s1/4)), 0)"],
    ),
    "reshape": (lambda x: x.reshape(x.shape[0] * x.shape[1]), []),
    "expand": (lambda x: x[:, None, :].expand(x.shape[0], 3, x.shape[1]), []),
    "cat": (lambda x: torch.cat([x, x], 1), []),
    "softmax": (lambda x: torch.softmax(x, -1), []),
    "arange": (lambda x: torch.arange(x.shape[0], device=x.device), []),
    "new_zeros": (lambda x: x.new_zeros(x.shape[0] * 2, 3), []),
    "transpose": (lambda x: x.transpose(0, 1).contiguous(), []),
    "slice": (lambda x: x[1:3], ["s0 >= 3"]),
    "select": (lambda x: torch.select(x, 0, x.shape[0] - 1), []),
    "linear": (lambda x: F.linear(x, _weight(x, 4, 8)), ["Eq(s1, 8)"]),
    "layer_norm": (lambda x: F.layer_norm(x, (x.shape[1],)), []),
    "sdpa": (lambda x: F.scaled_dot_product_attention(x[None], x[None], x[None]), []),
}


def _run(kind, fn, real, **dims):
    env = ShapeEnv(where=lambda: "user.py:1")
    if kind == "fake":
        mode = fake_mode(env)
        example = fake_tensor(mode, real, "L['x']", **dims)
        with mode:
            out = fn(example)
    else:
        example = meta_tensor(env, real, "L['x']", **dims)
        with enable_python_dispatcher():
            out = fn(example)
    return env, out


def _bind(env, sizes, values):
    """The symbolic `sizes` evaluated with each symbol read from `values` (new inputs)."""
    binding = {s: eval(text, {"L": values}) for s, text in env.symbol_names().items()}
    exprs = [env.simplify(s.node.expr) if isinstance(s, torch.SymInt) else s for s in sizes]
    return [int(sympy.sympify(e).xreplace(binding)) for e in exprs]


def _op_guards(env):
    return [str(g.expr) for g in env.guards() if g.source is None]


@pytest.mark.parametrize("kind", ["meta", "fake"])
@pytest.mark.parametrize("name", list(OPS))
def test_op_shapes_match_eager_at_another_size(kind, name):
    fn, expected_guards = OPS[name]
    env, out = _run(kind, fn, torch.randn(5, 8))
    assert _op_guards(env) == expected_guards
    check = compile_guards(env.render_guards())
    other = torch.randn(9, 8)
    assert check({"x": other}), failure_reason(env.render_guards(), {"x": other})
    assert _bind(env, out.shape, {"x": other}) == list(fn(other).shape)
    if kind == "fake":
        assert out.device == torch.device("cpu")


SHAPE_GENERIC = ["relu", "sum", "reshape", "expand", "cat", "softmax", "arange", "new_zeros",
                 "transpose", "select", "layer_norm", "sdpa"]  # fmt: skip


@pytest.mark.parametrize("name", SHAPE_GENERIC)
def test_shape_generic_ops_serve_both_dims_changing(name):
    fn = OPS[name][0]
    env, out = _run("fake", fn, torch.randn(5, 8))
    other = torch.randn(9, 12)
    assert compile_guards(env.render_guards())({"x": other})
    assert _bind(env, out.shape, {"x": other}) == list(fn(other).shape)


@pytest.mark.parametrize(
    ("name", "other", "reason"),
    [
        ("matmul", (5, 12), "L['x'].size()[1] == 8"),
        ("slice", (2, 8), "L['x'].size()[0] >= 3"),
        ("view", (3, 9), "((L['x'].size()[0] * L['x'].size()[1]) % 4) == 0"),
        ("relu", (1, 8), "L['x'].size()[0] >= 2"),  # size 1 would have specialized
    ],
)
def test_guards_fail_where_the_trace_would_be_wrong_with_a_readable_reason(name, other, reason):
    env, _ = _run("fake", OPS[name][0], torch.randn(5, 8))
    rendered = env.render_guards()
    values = {"x": torch.randn(*other)}
    assert not compile_guards(rendered)(values)
    message = failure_reason(rendered, values)
    assert reason in message, message


def test_strides_of_a_transposed_input_are_symbolic_and_guarded():
    env = ShapeEnv()
    x = meta_tensor(env, torch.randn(8, 5).t(), "L['x']")
    assert [str(s) for s in x.shape] == ["s0", "s1"]
    assert [str(s) for s in x.stride()] == ["1", "s0"]
    check = compile_guards(env.render_guards())
    assert check({"x": torch.randn(12, 9).t()})
    assert not check({"x": torch.randn(9, 12)})  # contiguous: another layout


def test_non_dense_strides_stay_constant_and_guarded():
    env = ShapeEnv()
    base = torch.randn(4, 10)
    x = meta_tensor(env, base[:, :6], "L['x']", dims={1: Dim()}, default=DimDynamic.STATIC)
    assert x.shape[0] == 4 and str(x.shape[1]) == "s0"
    assert x.stride() == (10, 1)
    check = compile_guards(env.render_guards())
    assert check({"x": base[:, :7]})
    assert not check({"x": torch.randn(4, 7)})  # stride 7, not 10
    assert not check({"x": torch.randn(5, 10)[:, :7]})  # dim 0 is static


def test_marked_dims_with_ranges_and_static_default():
    env = ShapeEnv()
    x = meta_tensor(env, torch.randn(5, 8), "L['x']", dims={0: Dim(min=2, max=64)},
                    default=DimDynamic.STATIC)  # fmt: skip
    assert str(x.shape[0]) == "s0" and x.shape[1] == 8
    codes = [g.code for g in env.render_guards()]
    assert "L['x'].size()[0] <= 64" in codes and "L['x'].size()[1] == 8" in codes


def test_requires_grad_and_dtype_are_kept():
    env = ShapeEnv()
    real = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    x = fake_tensor(fake_mode(env), real, "L['x']")
    assert x.requires_grad and x.dtype == torch.float64


@pytest.mark.parametrize(
    "fn", [torch.nonzero, lambda x: x[x > 0], torch.unique, lambda x: torch.masked_select(x, x > 0)]
)
def test_data_dependent_output_sizes_get_unbacked_symbols(fn):
    env = ShapeEnv(allow_dynamic_output_shape_ops=True)
    mode = fake_mode(env)
    x = fake_tensor(mode, torch.randn(5, 8), "L['x']")
    with mode:
        out = fn(x)
    (size,) = [s for s in out.shape if isinstance(s, torch.SymInt)]
    assert str(size).startswith("u")
    assert size.node.expr in env.unbacked
    assert env.statically_known_true(size.node.expr >= 0)


def test_data_dependent_output_sizes_refused_unless_allowed():
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    env = ShapeEnv()
    mode = fake_mode(env)
    x = fake_tensor(mode, torch.randn(5, 8), "L['x']")
    with mode, pytest.raises(DynamicOutputShapeException):
        torch.nonzero(x)


def test_item_gives_an_unbacked_value_when_allowed():
    env = ShapeEnv(allow_scalar_outputs=True)
    mode = fake_mode(env)
    x = fake_tensor(mode, torch.randn(5, 8), "L['x']")
    with mode:
        value = x.sum().item()
        count = (x > 0).sum().item()
    assert isinstance(value, torch.SymFloat) and isinstance(count, torch.SymInt)
