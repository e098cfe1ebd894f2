"""autotune_timing: each candidate timed as it will be called (one set of input clones reused
by every run, restored before each; back-to-back calls per sample), clearly slower candidates
raced out, nothing left behind."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.backends import autotune
from ember.backends.autotune_timing import set_measure, time_candidates


@pytest.fixture(autouse=True)
def clean(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    ember.reset()
    yield
    set_measure(None)


def test_runs_reuse_one_set_of_clones_put_back_before_each_run():
    seen = []

    def candidate(x, w):
        seen.append((x.data_ptr(), w.data_ptr(), x.clone(), w.grad))
        x.add_(1)  # writes its input, as an optimizer step or BatchNorm's stats do
        return (x * w).sum()

    x, w = torch.zeros(4), torch.ones(4, requires_grad=True)
    timings = time_candidates(
        torch.nn.Module(), {"c": candidate, "d": candidate}, [x, w],
        budget_s=0.0, warmup=2, min_runs=5, max_runs=5,
    )  # fmt: skip
    assert len(timings.samples["c"]) == len(timings.samples["d"]) == 5 and not timings.failed
    # the same tensors every run of every candidate (as a model passes its parameters), never
    # the user's
    assert {(a, b) for a, b, _, _ in seen} == {(seen[0][0], seen[0][1])}
    assert seen[0][0] != x.data_ptr() and seen[0][1] != w.data_ptr()
    # each run starts from the example inputs' values, without a gradient
    assert all(torch.equal(value, torch.zeros(4)) and grad is None for *_, value, grad in seen)
    assert torch.equal(x, torch.zeros(4)) and w.grad is None
    # a fast call is timed over a burst of back-to-back calls per round
    assert ember.counters["autotune"]["timing_runs"] > 5


def test_a_clearly_slower_candidate_is_raced_out_after_min_runs():
    set_measure(lambda name, run: (run(), {"slow": 1.0}.get(name, 0.1))[1])
    fn = torch.nn.functional.relu
    timings = time_candidates(
        torch.nn.Module(), {"slow": fn, "a": fn, "b": fn}, [torch.randn(3)],
        budget_s=60.0, warmup=1, min_runs=5, max_runs=8,
    )  # fmt: skip
    assert {n: len(s) for n, s in timings.samples.items()} == {"slow": 5, "a": 8, "b": 8}
    assert "slower than a by more than 1.5x in each of 5 rounds" in timings.dropped["slow"]
    assert not timings.failed


def test_the_kept_callable_is_the_one_that_was_timed(monkeypatch):
    timed = {}
    real = autotune.time_candidates

    def spy(gm, compiled, example_inputs, **kwargs):
        timed.update(compiled)
        return real(gm, compiled, example_inputs, **kwargs)

    monkeypatch.setattr(autotune, "time_candidates", spy)
    set_measure(lambda name, run: (run(), {"eager": 0.1}.get(name, 1.0))[1])
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    x = torch.randn(4)
    options = {"time_budget_s": 0.0, "warmup": 1, "min_runs": 5, "max_runs": 5}
    kept = autotune.autotune(gm, [x], plan=autotune.autotune_plan(None, options))
    decision = autotune.last_decisions()[-1]
    assert decision.choice == "eager" and kept is timed["eager"]
    torch.testing.assert_close(kept(x), torch.relu(x) * 2)


@pytest.mark.parametrize(("settled", "rounds"), [(True, 6), (False, 24)])
def test_an_open_choice_buys_more_rounds_within_the_budget(settled, rounds):
    set_measure(lambda name, run: (run(), 0.1)[1])
    fn = torch.nn.functional.relu
    timings = time_candidates(
        torch.nn.Module(), {"a": fn, "b": fn}, [torch.randn(3)],
        budget_s=60.0, warmup=1, min_runs=5, max_runs=6, settled=lambda samples: settled,
    )  # fmt: skip
    assert {n: len(s) for n, s in timings.samples.items()} == {"a": rounds, "b": rounds}


def test_inference_tensors_track_no_versions_so_every_run_puts_them_back():
    seen = []

    def candidate(x):
        seen.append(x.clone())
        x.add_(1)
        return x * 2

    with torch.inference_mode():
        x = torch.zeros(3)
        timings = time_candidates(
            torch.nn.Module(), {"c": candidate}, [x],
            budget_s=0.0, warmup=1, min_runs=5, max_runs=5,
        )  # fmt: skip
    assert len(timings.samples["c"]) == 5 and not timings.failed
    assert all(torch.equal(value, torch.zeros(3)) for value in seen)
    assert torch.equal(x, torch.zeros(3))
