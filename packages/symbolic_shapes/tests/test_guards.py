"""Guards rendered as Python over sources, compiled, and checked against new sizes."""

from dataclasses import dataclass

import sympy
import torch

from ember_symbolic import DimDynamic, ShapeEnv, compile_guards, failure_reason
from ember_symbolic.sources import size_source


@dataclass(frozen=True)
class LocalSource:
    """Stands in for the tracer's sources: an object with an `expr()` method."""

    name: str

    def expr(self) -> str:
        return f"L[{self.name!r}]"


def traced_env():
    """x: (6, 4) and y: (6,) share s0 by duck sizing; n is a size with a declared max
    (not marked DYNAMIC: a strict mark with a range refuses the guard n > 2, which size 2 of
    its range fails); the program branched on n > 2 and on x.size(1) being even."""
    env = ShapeEnv(where=lambda: "model.py:12")
    x, y = LocalSource("x"), LocalSource("y")
    s0 = env.create_symint(6, size_source(x, 0))
    s1 = env.create_symint(4, size_source(x, 1))
    assert env.create_symint(6, size_source(y, 0)) is not None
    n = env.create_symint(3, LocalSource("n"), max=100)
    assert bool(n > 2)
    assert bool(s1 % 2 == 0)
    assert bool(s0 * s1 >= 20)
    return env


def test_render_guards_as_python_over_the_sources():
    codes = [g.code for g in traced_env().render_guards()]
    assert codes == [
        "L['x'].size()[0] >= 2",
        "L['x'].size()[1] >= 2",
        "L['n'] >= 2",
        "L['n'] <= 100",
        "L['y'].size()[0] == L['x'].size()[0]",  # duck sizing
        "L['n'] > 2",
        "(L['x'].size()[1] % 2) == 0",
        "(L['x'].size()[0] * L['x'].size()[1]) >= 20",
    ]
    assert {g.where for g in traced_env().guards()} == {"model.py:12"}


def _frame(x_shape, y_len, n):
    return {"x": torch.empty(x_shape), "y": torch.empty(y_len), "n": n}


def test_compiled_guards_pass_on_new_sizes_that_keep_every_decision():
    check = compile_guards(traced_env().render_guards())
    assert check(_frame((6, 4), 6, 3))
    assert check(_frame((10, 8), 10, 50))
    assert failure_reason(traced_env().render_guards(), _frame((10, 8), 10, 50)) is None


def test_compiled_guards_fail_with_the_failing_expression_as_reason():
    rendered = traced_env().render_guards()
    cases = {
        "L['y'].size()[0] == L['x'].size()[0]": _frame((6, 4), 7, 3),
        "L['n'] > 2": _frame((6, 4), 6, 2),
        "L['n'] <= 100": _frame((6, 4), 6, 101),
        "(L['x'].size()[1] % 2) == 0": _frame((10, 5), 10, 3),
        "(L['x'].size()[0] * L['x'].size()[1]) >= 20": _frame((3, 4), 3, 3),
        "L['x'].size()[1] >= 2": _frame((6, 1), 6, 3),
    }
    for code, frame in cases.items():
        assert not compile_guards(rendered)(frame)
        reason = failure_reason(rendered, frame)
        assert reason.startswith(f"shape guard failed: {code}  (that is, "), reason


def test_failure_reason_names_the_sympy_expression_and_line():
    env = ShapeEnv(where=lambda: "model.py:30")
    s = env.create_symint(5, "L['k']")
    assert bool(s < 9)
    reason = failure_reason(env.render_guards(), {"k": 9})
    assert reason == "shape guard failed: L['k'] < 9  (that is, s0 < 9, added at model.py:30)"


def test_a_source_that_no_longer_resolves_fails_the_guard():
    rendered = traced_env().render_guards()
    assert "raised KeyError" in failure_reason(rendered, {"x": torch.empty(6, 4)})


def test_custom_name_of_for_opaque_sources():
    env = ShapeEnv()
    env.create_symint(5, ("arg", 0))
    assert [g.code for g in env.render_guards(lambda src: f"args[{src[1]}]")] == ["args[0] >= 2"]


def test_specialized_and_static_sizes_are_guarded_on_their_source():
    env = ShapeEnv()
    env.create_symint(1, "L['a']")
    env.create_symint(7, "L['b']", dynamic=DimDynamic.STATIC)
    assert [g.code for g in env.render_guards()] == ["L['a'] == 1", "L['b'] == 7"]


def test_guards_are_sympy_booleans():
    for guard in traced_env().guards():
        assert isinstance(guard.expr, sympy.Basic)


def test_a_guard_pinning_a_size_to_an_int_names_the_source():
    env = ShapeEnv(where=lambda: "model.py:40")
    x = LocalSource("x")
    rows = env.create_symint(12, size_source(x, 0))
    cols = env.create_symint(5, size_source(x, 1))
    assert bool(rows == 12)  # Eq(s0, 12): the size is pinned, whatever its symbol
    assert bool(cols > 3)  # a bound, not a pin
    env.create_symint(1, size_source(x, 2))  # size 1 specializes: pinned by source
    pinned = {g.code: g.pinned for g in env.render_guards()}
    assert pinned["L['x'].size()[0] == 12"] == (size_source(x, 0), 12)
    assert pinned["L['x'].size()[2] == 1"] == (size_source(x, 2), 1)
    assert pinned["L['x'].size()[1] > 3"] is None
    assert pinned["L['x'].size()[1] >= 2"] is None
