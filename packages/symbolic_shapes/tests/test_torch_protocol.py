"""The ShapeEnv methods torch's own helpers call through `symint.node.shape_env`.

Tests (unlike product code) may import torch.fx.experimental.symbolic_shapes: here it is
the caller whose expectations we check.
"""

import pytest
import torch
from torch.fx.experimental import symbolic_shapes as torch_helpers

from ember_symbolic import ShapeEnv


@pytest.fixture
def env():
    return ShapeEnv(where=lambda: "user.py:5")


def test_guard_or_false_decides_backed_conditions_with_a_guard(env):
    s = env.create_symint(6, "n")
    assert torch_helpers.guard_or_false(s > 4) is True
    assert torch_helpers.guard_or_true(s > 9) is False
    assert [str(g.expr) for g in env.guards()] == ["s0 > 4", "s0 <= 9"]


def test_guard_or_false_takes_the_fallback_on_unbacked(env):
    u = env.create_unbacked_symint()
    assert torch_helpers.guard_or_false(u > 4) is False
    assert torch_helpers.guard_or_true(u > 4) is True
    assert env.guards() == []


def test_statically_known_true_adds_no_guard(env):
    s = env.create_symint(6, "n")
    assert torch_helpers.statically_known_true(s >= 2)
    assert not torch_helpers.statically_known_true(s > 4)
    assert env.guards() == []


def test_has_static_value_reads_our_bounds(env):
    s = env.create_symint(6, "n")
    assert not torch_helpers.has_static_value(s)
    assert torch_helpers.has_static_value(torch.sym_min(s, 1))


def test_constrain_range_for_size_and_constrain_range(env):
    u = env.create_unbacked_symint(min=-5)
    torch_helpers._constrain_range_for_size(u, max=40)
    assert (env.ranges[u.node.expr].lo, env.ranges[u.node.expr].hi) == (0, 40)
    torch_helpers.constrain_range(u, min=3, max=30)
    assert (env.ranges[u.node.expr].lo, env.ranges[u.node.expr].hi) == (3, 30)


def test_var_to_range_is_in_torch_value_ranges(env):
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    s = env.create_symint(6, "n")
    ranges = env.var_to_range
    assert isinstance(ranges[s.node.expr], ValueRanges)
    assert bound_sympy(s.node.expr * 2, ranges).lower == 4


def test_unbacked_float_and_bool(env):
    assert isinstance(env.create_unbacked_symfloat(), torch.SymFloat)
    assert isinstance(env.create_unbacked_symbool(), torch.SymBool)
