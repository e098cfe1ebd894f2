"""ember.set_stance: the stances of torch.compiler.set_stance, on Ember's compiled code."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.exc import EmberError, RecompileRefused


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


@pytest.fixture
def compiled():
    ember.reset()
    fn = ember.compile(_double, dynamic=False)
    fn(torch.ones(3))  # the first compile: never a recompile
    yield fn
    ember.set_stance("default")


def _graphs() -> int:
    return ember.counters["inductor"]["forward_graphs"]


def test_fail_on_recompile_raises_naming_the_guard_but_cached_code_runs(compiled) -> None:
    with ember.set_stance("fail_on_recompile"):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), _double(x))  # same sizes: cached code
        with pytest.raises(RecompileRefused, match=r"fail_on_recompile.*guard that failed"):
            compiled(torch.randn(5))
    torch.testing.assert_close(compiled(torch.ones(5)), _double(torch.ones(5)))  # default again
    assert _graphs() == 2


def test_eager_on_recompile_runs_python_and_compiles_nothing_new(compiled) -> None:
    with ember.set_stance("eager_on_recompile"):
        x = torch.randn(5)
        torch.testing.assert_close(compiled(x), _double(x))
        assert _graphs() == 1
    compiled(torch.randn(5))
    assert _graphs() == 2  # nothing was given up for good


def test_force_eager_runs_the_function_as_python(compiled) -> None:
    runs = ember.counters["inductor"]["forward_runs"]

    @ember.set_stance("force_eager")
    def eager_call(x):
        return compiled(x)

    x = torch.randn(3)
    torch.testing.assert_close(eager_call(x), _double(x))
    assert ember.counters["inductor"]["forward_runs"] == runs  # not the compiled code
    compiled(x)  # the decorator's stance held only for its call
    assert ember.counters["inductor"]["forward_runs"] == runs + 1


def test_a_plain_call_sets_the_stance_until_changed(compiled) -> None:
    ember.set_stance("fail_on_recompile")
    with pytest.raises(RecompileRefused):
        compiled(torch.randn(7))
    ember.set_stance("default")
    compiled(torch.randn(7))


def test_an_unknown_stance_is_refused() -> None:
    with pytest.raises(EmberError, match="unknown compile stance 'fast'"):
        ember.set_stance("fast")
