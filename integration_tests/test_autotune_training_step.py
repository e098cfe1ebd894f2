"""backend="autotune" on a whole training step (forward, loss.backward(), clipping and the
optimizer step), against eager PyTorch: timing runs every candidate on clones, so the
parameters, gradients and optimizer state after each step are eager's whichever candidate
is kept. The clock is faked so that each outcome is tested: eager kept, inductor kept."""

from __future__ import annotations

import copy

import pytest
import torch

import ember
from ember.backends import autotune
from ember.backends.autotune_timing import set_measure

TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")  # every graph timed here
    ember.reset()
    autotune.clear_decisions()
    yield
    set_measure(None)
    ember.reset()


def _step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss

    return step


@pytest.mark.parametrize("winner", ["eager", "inductor"])
def test_training_step_matches_eager_whichever_candidate_wins(winner):
    def measure(name, run):
        run()
        return 0.1 if name == winner else 1.0

    set_measure(measure)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ref_model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ref_opt = torch.optim.Adam(ref_model.parameters(), lr=0.01)
    options = {"time_budget_s": 0.0, "warmup": 1, "min_runs": 5, "max_runs": 5}
    compiled = ember.compile(_step(model, opt), backend="autotune", options=options)
    eager = _step(ref_model, ref_opt)
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), eager(x, y), **TOL)
        for p, q in zip(model.parameters(), ref_model.parameters(), strict=True):
            torch.testing.assert_close(p, q, **TOL)
            torch.testing.assert_close(p.grad, q.grad, **TOL)
            for key, value in ref_opt.state[q].items():
                torch.testing.assert_close(opt.state[p][key], value, **TOL)
    decisions = autotune.last_decisions()
    assert len(decisions) >= 2  # the forward (trained) and the clip + optimizer-step graph
    assert {d.choice for d in decisions} == {winner}
    assert any(d.training for d in decisions)
    stats = ember.counters["inductor"]
    if winner == "inductor":
        assert stats["forward_runs"] >= 3 and stats["backward_runs"] == 3
    else:
        assert stats["forward_runs"] == 0 and stats["backward_runs"] == 0
