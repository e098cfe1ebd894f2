"""ShapeEnv: symbols, specialization, duck sizing, guards with where-strings, ranges."""

import pytest
import sympy
import torch

from ember_symbolic import (
    ConstraintViolationError,
    DataDependentError,
    DimDynamic,
    InvalidSizeError,
    ShapeEnv,
)


def make_env() -> ShapeEnv:
    return ShapeEnv(where=lambda: "user.py:7")


def test_create_symbol_is_a_positive_integer_with_its_value_and_source():
    env = make_env()
    s = env.create_symbol(5, "L['x'].size()[0]")
    assert isinstance(s, sympy.Symbol)
    assert s.is_integer and s.is_positive
    assert env.size_hint(s) == 5
    assert env.var_to_sources[s] == ["L['x'].size()[0]"]
    assert str(env.ranges[s]) == "[2, oo]"  # 0 and 1 specialize, so a symbol is >= 2


@pytest.mark.parametrize("value", [0, 1])
def test_sizes_0_and_1_specialize_with_a_guard_on_their_source(value):
    env = make_env()
    assert env.create_symbol(value, "n") == value
    assert env.create_symint(value, "n") == value
    assert type(env.create_symint(value, "n")) is int
    assert (env.guards()[0].source, env.guards()[0].expr) == ("n", value)


def test_static_dims_are_constants():
    env = make_env()
    assert env.create_symbol(7, "n", dynamic=DimDynamic.STATIC) == 7
    assert env.var_to_val == {}


def test_duck_sizing_shares_a_symbol_and_records_the_source_equality():
    env = make_env()
    a = env.create_symbol(6, "a")
    b = env.create_symbol(6, "b")
    c = env.create_symbol(7, "c")
    assert a is b and a != c
    (guard,) = env.guards()
    assert (guard.source, guard.expr, guard.where) == ("b", a, "user.py:7")
    assert [r.code for r in env.render_guards()][-1] == "b == a"


def test_duck_sizing_off_and_marked_dynamic_dims_get_their_own_symbols():
    env = ShapeEnv(duck_shape=False)
    assert env.create_symbol(6, "a") != env.create_symbol(6, "b")
    env = make_env()
    assert env.create_symbol(6, "a") != env.create_symbol(6, "b", dynamic=DimDynamic.DYNAMIC)


def test_evaluate_records_the_guard_it_relied_on_with_the_where_string():
    env = make_env()
    s = env.create_symint(5, "n")
    assert bool(s > 3)
    assert not bool(s > 7)
    exprs = [str(g.expr) for g in env.guards()]
    assert exprs == [str(sympy.Symbol("s0") > 3), "s0 <= 7"]
    assert {g.where for g in env.guards()} == {"user.py:7"}


def test_conditions_decided_by_ranges_or_earlier_guards_add_no_guard():
    env = make_env()
    s = env.create_symint(5, "n")
    assert bool(s >= 2) and bool(s != 0) and bool(s * 2 > s)  # symbol ranges prove these
    assert env.guards() == []
    assert bool(s > 3)
    assert bool(s > 2)  # implied by s0 > 3 (the range became [4, oo])
    assert bool(s > 3)  # the same question twice: one guard
    assert len(env.guards()) == 1


def test_guards_are_simplified_with_sympy():
    env = make_env()
    s = env.create_symint(6, "n")
    assert bool((2 * s + 2) // 2 == s + 1)  # floor((2*s0 + 2)/2) simplifies to s0 + 1
    assert bool(s % 2 == 0)
    exprs = [g.expr for g in env.guards()]
    assert exprs == [sympy.Eq(sympy.Mod(sympy.Symbol("s0", integer=True, positive=True), 2), 0)]


def test_int_of_a_symbol_specializes_it_and_later_uses_see_the_constant():
    env = make_env()
    s = env.create_symint(5, "n")
    assert int(s) == 5
    assert str(env.guards()[0].expr) == "Eq(s0, 5)"
    assert env.simplify(s.node.expr + 1) == 6


def test_specializing_a_marked_dynamic_dim_is_a_constraint_violation_naming_the_line():
    env = make_env()
    s = env.create_symint(5, "L['x'].size()[0]", dynamic=DimDynamic.DYNAMIC)
    assert bool(s > 2)  # a range guard is fine
    with pytest.raises(ConstraintViolationError) as info:
        int(s)
    assert info.value.where == "user.py:7"
    assert "L['x'].size()[0] was marked dynamic" in str(info.value)
    assert "user.py:7" in str(info.value)


def test_bounds_that_leave_a_marked_dim_one_value_are_a_constraint_violation():
    env = make_env()
    s = env.create_symint(3, "L['x'].size()[0]", dynamic=DimDynamic.DYNAMIC)
    assert not bool(s > 3)  # one bound: still a range
    with pytest.raises(ConstraintViolationError, match="requires it to be 3"):
        bool(s < 3)  # false: s >= 3 with s <= 3 pins it


def test_a_specialized_marked_dim_is_a_runtime_error_that_says_so():
    env = make_env()
    s = env.create_symint(4, "L['x'].size()[1]", dynamic=DimDynamic.DYNAMIC)
    with pytest.raises(RuntimeError, match="specialized it to a constant") as info:
        bool(s == 4)
    assert isinstance(info.value, ConstraintViolationError)


def test_bounds_that_leave_an_unmarked_dim_one_value_just_guard():
    env = make_env()
    s = env.create_symint(3, "L['x'].size()[0]")
    assert not bool(s > 3) and not bool(s < 3)
    assert env.statically_known_true(sympy.Eq(s.node.expr, 3))


def test_marking_a_size_1_dim_dynamic_is_refused():
    with pytest.raises(ConstraintViolationError, match="sizes 0 and 1 always specialize"):
        make_env().create_symbol(1, "x", dynamic=DimDynamic.DYNAMIC)


def test_min_max_become_the_symbol_range():
    env = make_env()
    s = env.create_symbol(5, "n", dynamic=DimDynamic.DYNAMIC, min=3, max=64)
    assert (env.ranges[s].lo, env.ranges[s].hi) == (3, 64)
    assert env.statically_known_true(s <= 64)
    assert env.statically_known_true(s > 2)
    assert not env.statically_known_true(s > 3)
    codes = [r.code for r in env.render_guards()]
    assert codes == ["n >= 3", "n <= 64"]


def test_bad_arguments_raise_typed_errors():
    env = make_env()
    with pytest.raises(InvalidSizeError):
        env.create_symbol(-1, "n")
    with pytest.raises(InvalidSizeError):
        env.create_symbol(5, "n", min=9, max=3)
    with pytest.raises(ConstraintViolationError, match="outside its declared range"):
        env.create_symbol(5, "n", dynamic=DimDynamic.DYNAMIC, min=6)


def test_size_hint_and_statically_known_true():
    env = make_env()
    s0 = env.create_symbol(5, "a")
    s1 = env.create_symbol(8, "b")
    assert env.size_hint(s0 * s1 + 1) == 41
    assert env.statically_known_true(sympy.Eq(s0 * s1, s1 * s0))
    assert not env.statically_known_true(sympy.Eq(s0, s1))
    assert env.static_value(sympy.Eq(s0 + 1, s0)) is False
    assert env.guards() == []  # none of these record guards


def test_equality_guard_between_symbols_replaces_the_newer_one():
    env = make_env()
    a = env.create_symint(6, "a", dynamic=DimDynamic.DYNAMIC)
    b = env.create_symint(6, "b", dynamic=DimDynamic.DYNAMIC)
    assert bool(a == b)
    assert env.statically_known_true(sympy.Eq(b.node.expr * 2, a.node.expr * 2))
    assert str(b.node.expr) == "s0"


def test_unbacked_symbols_have_ranges_and_no_hint():
    env = make_env()
    u = env.create_unbacked_symint(min=0, max=100)
    assert isinstance(u, torch.SymInt)
    assert not u.node.has_hint() and u.node.hint is None
    assert str(u) == "u0"
    assert env.statically_known_true(u.node.expr >= 0)
    assert env.statically_known_true(u.node.expr < 101)
    with pytest.raises(DataDependentError, match="depends on data"):
        bool(u > 5)
    assert u.node.guard_or_false("", 0) is False  # undecidable: the safe answer, no guard
    assert u.node.guard_or_true("", 0) is True
    assert env.guards() == []


def test_expect_true_on_unbacked_defers_a_runtime_assert():
    env = make_env()
    u = env.create_unbacked_symint()
    torch._check(u > 2)  # torch's own check helper calls expect_true
    assert [str(g.expr) for g in env.deferred_asserts] == ["u0 > 2"]
    assert env.guards() == []


def test_suppress_guards_reads_values_without_recording():
    env = make_env()
    s = env.create_symint(5, "n")
    with env.suppress_guards():
        assert bool(s > 3)
    assert env.guards() == []


def test_default_where_names_the_calling_file_and_line():
    env = ShapeEnv()
    s = env.create_symint(5, "n")
    assert bool(s > 3)
    (guard,) = env.guards()
    assert guard.where.endswith(
        f"test_shape_env.py:{test_default_where_names_the_calling_file_and_line.__code__.co_firstlineno + 3}"
    )


def test_a_deferred_assert_narrows_the_range_of_an_unbacked_int():
    env = make_env()
    u = env.create_unbacked_symint()  # an item(): any sign until something says otherwise
    assert env.static_value(u.node.expr >= 0) is None
    torch._check((u >= 3) & (u <= 10))
    assert env.statically_known_true(u.node.expr >= 0)
    assert env.statically_known_true(u.node.expr < 11)
    f = env.create_unbacked_symfloat()
    torch._check(f > 2)  # a float bound is a fact, not an integer range
    assert env.statically_known_true((f > 2).node.expr)
    assert env.static_value((f >= 3).node.expr) is None


def test_a_guard_that_part_of_a_declared_range_fails_is_a_constraint_violation():
    # min/max on a dim marked dynamic: one graph must serve each size in [2, 6]; the guard
    # s != 3 (the program asked `size == 3` and got False) sends size 3 elsewhere
    env = make_env()
    s = env.create_symint(4, "L['x'].size()[0]", dynamic=DimDynamic.DYNAMIC, min=2, max=6)
    with pytest.raises(ConstraintViolationError, match="size 3 of that range") as info:
        bool(s == 3)
    assert info.value.where == "user.py:7"


@pytest.mark.parametrize(
    "size, min, max, decide, failing",
    [
        (5, 2, 6, lambda s: s > 3, 2),  # a bound inside the range
        (8, 4, None, lambda s: s < 100, 100),  # an open range: the boundary is checked
        (8, 2, 1000, lambda s: 2 * s <= 997, 499),  # a large range: around 997/2
        (8, 2, 1000, lambda s: s % 2 == 0, 3),  # a parity guard
    ],
)
def test_declared_range_violations_name_a_failing_size(size, min, max, decide, failing):
    env = make_env()
    s = env.create_symint(size, "n", dynamic=DimDynamic.DYNAMIC, min=min, max=max)
    with pytest.raises(ConstraintViolationError, match=f"size {failing} of that range"):
        bool(decide(s))


def test_guards_every_size_of_the_declared_range_passes_are_accepted():
    env = make_env()
    s = env.create_symint(4, "n", dynamic=DimDynamic.DYNAMIC, min=3, max=6)
    assert bool(s != 2) and bool(s * 2 > 5) and bool(s < 7)  # the range decides these
    assert bool(s * s % 7 != 0)  # a guard, and every size 3..6 passes it
    t = env.create_symint(5, "m", dynamic=DimDynamic.DYNAMIC, min=3, max=6)
    assert bool(s + t >= 9)  # over two symbols: not checked against the ranges
    relaxed = env.create_symint(5, "k", dynamic=DimDynamic.DYNAMIC)
    assert bool(relaxed > 3)  # marked without a range: only a constant is refused
    assert len(env.guards()) == 3
