"""Our SymNode behind torch.SymInt/SymFloat/SymBool: the protocol torch 2.13 calls."""

import math
import operator

import pytest
import torch
import torch.fx

from ember_symbolic import DimDynamic, ShapeEnv, SymNode, is_ember_symbolic


@pytest.fixture
def env():
    return ShapeEnv(where=lambda: "user.py:3")


@pytest.fixture
def s(env):
    return env.create_symint(6, "n")


@pytest.mark.parametrize(
    ("fn", "text", "value"),
    [
        (lambda s: s + 1, "s0 + 1", 7),
        (lambda s: 2 * s - 1, "2*s0 - 1", 11),
        (lambda s: s * s, "s0**2", 36),
        (lambda s: s // 4, "floor(s0/4)", 1),
        (lambda s: s % 4, "Mod(s0, 4)", 2),
        (lambda s: -s, "-s0", -6),
        (lambda s: torch.sym_max(s, 10), "Max(10, s0)", 10),
        (lambda s: torch.sym_min(s, 10), "Min(10, s0)", 6),
        (lambda s: torch.sym_sum([s, s, 3]), "2*s0 + 3", 15),
    ],
)
def test_int_arithmetic_stays_symbolic(env, s, fn, text, value):
    out = fn(s)
    assert isinstance(out, torch.SymInt) and is_ember_symbolic(out)
    assert str(out) == text
    assert out.node.hint == value
    assert env.guards() == []  # arithmetic never guards


def test_float_results(env, s):
    half = s / 4
    assert isinstance(half, torch.SymFloat)
    assert half.node.hint == 1.5
    assert isinstance(torch.sym_float(s), torch.SymFloat)
    assert math.isclose(float(s * 0.5), 3.0)  # float() decides, with a guard
    assert len(env.guards()) == 1


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (operator.lt, False),
        (operator.le, True),
        (operator.gt, False),
        (operator.ge, True),
        (operator.eq, True),
        (operator.ne, False),
    ],
)
def test_comparisons_give_symbools_decided_with_a_guard(env, s, op, expected):
    other = env.create_symint(6, "m", dynamic=DimDynamic.DYNAMIC)
    result = op(s, other)
    assert isinstance(result, torch.SymBool)
    assert bool(result) is expected
    assert len(env.guards()) == 1 and env.guards()[0].where == "user.py:3"


def test_symbool_logic(env, s):
    both = torch.sym_not((s > 4) & (s < 10))
    assert isinstance(both, torch.SymBool)
    assert bool(both) is False


def test_protocol_queries(env, s):
    node = s.node
    assert isinstance(node, SymNode) and node.shape_env is env
    assert node.is_int() and not node.is_float() and not node.is_bool()
    assert node.has_hint() and node.hint == 6
    assert node.maybe_as_int() is None
    assert node.wrap_int(3).maybe_as_int() == 3
    assert node.wrap_float(0.5).is_float() and node.wrap_bool(True).maybe_as_bool() is True
    assert node.str() == "s0" and node._graph_repr() == "s0"
    assert not node.is_nested_int() and node.is_symbolic()
    assert node.guard_int("f.py", 1) == 6
    assert node.eq(node.wrap_int(6)).guard_or_false("f.py", 1) is True  # proved by Eq(s0, 6)


def test_constant_results_are_plain_python_values(s):
    assert (s - s) == 0
    assert type(s - s) is int


def test_hash_of_a_symint_is_refused_like_torch(s):
    with pytest.raises(TypeError):
        hash(s)


def test_symints_sit_in_an_fx_graph_as_example_values(env):
    """A SymInt-producing node (x.size(0)) carries one of our SymInts as its example value,
    and arithmetic on it is an FX node too."""
    from ember_symbolic.tensors import meta_tensor

    x_example = meta_tensor(env, torch.randn(5, 8), "L['x']")
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["example_value"] = x_example
    size = graph.call_method("size", (x, 0))
    size.meta["example_value"] = x_example.size(0)
    doubled = graph.call_function(operator.mul, (size, 2))
    doubled.meta["example_value"] = size.meta["example_value"] * 2
    out = graph.call_method("new_zeros", (x, doubled))
    graph.output(out)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert is_ember_symbolic(size.meta["example_value"])
    assert str(doubled.meta["example_value"]) == "2*s0"
    assert doubled.meta["example_value"].node.shape_env is env  # how lower stages find it
    assert gm(torch.randn(7, 3)).shape == (14,)
    assert "size" in gm.code and "mul" in gm.code
