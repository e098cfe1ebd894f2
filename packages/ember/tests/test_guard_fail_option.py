"""ember.compile(..., guard_fail_fn=...): told of each recompile with the failed guard, the
same words as the recompile log; never called for a first compile or a cache hit."""

from __future__ import annotations

import pickle

import pytest
import torch

import ember
from ember.exc import EmberError


def _branchy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.shape[0] > 3:
        return a.cos() - b
    return a.sin() * b


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_each_recompile_reports_its_failed_guard(backend) -> None:
    seen: list[ember.GuardFailure] = []
    compiled = ember.compile(_branchy, backend=backend, dynamic=False, guard_fail_fn=seen.append)
    calls = [(torch.randn(2, 3), torch.randn(2, 3)), (torch.randn(2, 3), torch.randn(2, 3)),
             (torch.randn(6, 3), torch.randn(6, 3))]  # fmt: skip
    for a, b in calls:
        torch.testing.assert_close(compiled(a, b), _branchy(a, b))
    assert len(seen) == 1  # the first call compiles, the second hits the cache
    failure = seen[0]
    assert failure.code is _branchy.__code__ and failure[1] is failure.code
    assert failure[0] == failure.reason
    assert "L['a']" in failure.reason and "(2, 3)" in failure.reason and "(6, 3)" in failure.reason
    records = compiled._ember_compiler.records
    assert len(records) == 2 and records[1].recompile_reason == failure.reason
    if backend == "inductor":
        assert ember.counters["inductor"]["forward_graphs"] == 2


def test_a_raising_callback_stops_the_recompile() -> None:
    class Stop(Exception):
        pass

    def refuse(failure: ember.GuardFailure) -> None:
        raise Stop(failure.reason)

    compiled = ember.compile(_branchy, backend="eager", dynamic=False, guard_fail_fn=refuse)
    a = torch.randn(2, 3)
    torch.testing.assert_close(compiled(a, a), _branchy(a, a))
    with pytest.raises(Stop, match="L\\['a'\\]"):
        compiled(torch.randn(5, 3), torch.randn(5, 3))
    assert len(compiled._ember_compiler.records) == 1


def test_a_recompile_refused_by_the_stance_is_reported_first() -> None:
    seen: list[ember.GuardFailure] = []
    compiled = ember.compile(_branchy, backend="eager", dynamic=False, guard_fail_fn=seen.append)
    a = torch.randn(2, 3)
    compiled(a, a)
    with ember.set_stance("fail_on_recompile"), pytest.raises(ember.exc.RecompileRefused):
        compiled(torch.randn(4, 3), torch.randn(4, 3))
    assert [f.code for f in seen] == [_branchy.__code__]


class _Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_compiled_module_keeps_the_callback_and_pickles_with_a_plain_function() -> None:
    seen: list[ember.GuardFailure] = []
    compiled = ember.compile(_Twice(), backend="eager", dynamic=False, guard_fail_fn=seen.append)
    for n in (2, 3):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), x * 2)
    assert len(seen) == 1
    again = pickle.loads(pickle.dumps(ember.compile(_Twice(), backend="eager", guard_fail_fn=len)))
    torch.testing.assert_close(again(torch.ones(2)), torch.full((2,), 2.0))


def test_a_callback_that_is_not_callable_is_refused() -> None:
    with pytest.raises(EmberError, match="guard_fail_fn must be a function"):
        ember.compile(_branchy, guard_fail_fn="print")
