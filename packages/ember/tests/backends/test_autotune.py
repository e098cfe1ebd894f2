"""backend="autotune": candidates timed per graph, the fastest kept (eager when inductor does not
pay), decisions stored on disk and reused by a later process, typed errors for bad options.

Most tests force the outcome with a fake clock (`autotune_timing.set_measure`): each timed run
still executes, but the seconds reported are the test's."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import ember
from ember.backends import autotune
from ember.backends.autotune_timing import set_measure


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("autotune") / "cache"


@pytest.fixture(autouse=True)
def private_cache(kernel_cache, monkeypatch):
    # kernels shared by the tests of this module; decisions not stored (each test times)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(kernel_cache))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    autotune.clear_decisions()
    yield
    set_measure(None)


def fake_clock(seconds: dict[str, float]):
    """A clock under which candidate `name` takes seconds[name] (others 1.0)."""
    ran: list[str] = []

    def measure(name, run):
        run()
        ran.append(name)
        return seconds.get(name, 1.0)

    set_measure(measure)
    return ran


def fast_options(**extra):
    # five rounds: the fewest in which the sign test lets a candidate replace inductor
    return {"time_budget_s": 0.0, "warmup": 1, "min_runs": 5, "max_runs": 5, **extra}


def f(x, y):
    return torch.relu(x @ y).sin() + y.sum(0)


def test_eager_kept_when_it_is_fastest_and_the_graph_runs_eagerly():
    ran = fake_clock({"eager": 0.1, "aot_eager": 0.5, "inductor": 0.3})
    x, y = torch.randn(6, 8), torch.randn(8, 8)
    compiled = ember.compile(f, backend="autotune", options=fast_options())
    torch.testing.assert_close(compiled(x, y), f(x, y))
    torch.testing.assert_close(compiled(x, y), f(x, y))
    (decision,) = autotune.last_decisions()
    assert decision.choice == "eager" and decision.source == "timed"
    assert set(decision.timings_ms) == {"eager", "aot_eager", "inductor"}
    assert set(ran) == {"eager", "aot_eager", "inductor"}
    stats = ember.counters["autotune"]
    assert (
        stats["graphs"] == 1 and stats["kept_eager"] == 1 and stats["timing_runs"] == 15
    )  # min_runs rounds of one call each (a fake second per call: bursts of one)
    # the inductor candidate compiled, but neither timing nor the user's calls ran it
    assert ember.counters["inductor"]["forward_graphs"] == 1
    assert ember.counters["inductor"]["forward_runs"] == 0


def test_inductor_kept_when_it_wins():
    fake_clock({"eager": 1.0, "aot_eager": 1.2, "inductor": 0.4})
    x, y = torch.randn(6, 8), torch.randn(8, 8)
    compiled = ember.compile(f, backend="autotune", options=fast_options())
    torch.testing.assert_close(compiled(x, y), f(x, y))
    assert autotune.last_decisions()[-1].choice == "inductor"
    assert ember.counters["inductor"]["forward_runs"] == 1  # the user's call, not the timing


def test_at_least_min_runs_rounds_past_the_budget():
    fake_clock({"inductor": 0.1})
    options = {"time_budget_s": 0.0, "warmup": 0, "min_runs": 4, "max_runs": 10}
    ember.compile(f, backend="autotune", options=options)(torch.randn(6, 8), torch.randn(8, 8))
    assert autotune.last_decisions()[-1].runs == {"eager": 4, "aot_eager": 4, "inductor": 4}


def test_a_win_within_the_margin_keeps_inductor():
    fake_clock({"eager": 0.97, "aot_eager": 1.0, "inductor": 1.0})
    compiled = ember.compile(f, backend="autotune", options=fast_options(margin=0.05))
    compiled(torch.randn(6, 8), torch.randn(8, 8))
    assert autotune.last_decisions()[-1].choice == "inductor"


def test_a_win_in_too_few_rounds_keeps_inductor():
    fake_clock({"eager": 0.1, "aot_eager": 1.0, "inductor": 1.0})
    options = {"time_budget_s": 0.0, "warmup": 1, "min_runs": 4, "max_runs": 4}
    ember.compile(f, backend="autotune", options=options)(torch.randn(6, 8), torch.randn(8, 8))
    assert autotune.last_decisions()[-1].choice == "inductor"  # 2**-4 > 0.05: could be chance


def test_tiny_graph_dominated_by_call_overhead_runs_eagerly_on_a_real_clock():
    def tiny(x):
        return x + 1

    x = torch.randn(3)
    compiled = ember.compile(tiny, backend="autotune", options={"time_budget_s": 0.3})
    torch.testing.assert_close(compiled(x), tiny(x))
    (decision,) = autotune.last_decisions()
    assert decision.choice == "eager", decision
    assert decision.runs["eager"] >= 1 and "inductor" in decision.timings_ms


def test_training_graph_decided_on_forward_plus_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    twin.load_state_dict(model.state_dict())
    fake_clock({"eager": 1.0, "aot_eager": 1.0, "inductor": 0.2})
    compiled = ember.compile(twin, backend="autotune", options=fast_options())
    x = torch.randn(5, 8)
    loss = compiled(x).square().sum()
    loss.backward()
    expected = model(x).square().sum()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for mine, theirs in zip(twin.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)  # timing left no gradient behind
    decision = autotune.last_decisions()[-1]
    assert decision.training and decision.choice == "inductor"
    assert ember.counters["inductor"]["forward_runs"] == 1
    assert ember.counters["inductor"]["backward_runs"] == 1


def test_timing_leaves_inputs_and_the_rng_stream_as_eager_would():
    def g(x):
        x.add_(1)
        return x * torch.rand(4)

    fake_clock({"eager": 0.1})
    x, x_ref = torch.zeros(4), torch.zeros(4)
    compiled = ember.compile(g, backend="autotune", options=fast_options())
    torch.manual_seed(3)
    out = compiled(x)
    torch.manual_seed(3)
    expected = g(x_ref)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x, x_ref)  # written once, by the user's call
    assert autotune.last_decisions()[-1].choice == "eager"


def test_candidates_option_limits_what_is_timed():
    ran = fake_clock({"inductor": 0.1})
    options = fast_options(candidates=["eager", "inductor"])
    compiled = ember.compile(f, backend="autotune", options=options)
    compiled(torch.randn(6, 8), torch.randn(8, 8))
    assert set(ran) == {"eager", "inductor"}
    assert ember.counters["aot_eager"]["forward_graphs"] == 0


def test_autotune_log_shows_timings_and_choice(caplog, monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "autotune")
    fake_clock({"eager": 0.002, "inductor": 0.001})
    with caplog.at_level(logging.INFO, logger="ember.autotune"):
        compiled = ember.compile(f, backend="autotune", options=fast_options())
        compiled(torch.randn(6, 8), torch.randn(8, 8))
    monkeypatch.delenv("EMBER_LOGS")
    ember.logs.configure_from_env()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "ember.autotune"]
    assert "eager 2.000 ms" in line and "inductor 1.000 ms" in line
    assert "-> inductor (timed; " in line  # then why: eager never won a round
    assert "eager vs inductor: faster in 0/5 rounds, ratio 2.000, p=1;" in line


def test_each_decision_is_an_event_for_the_compile_trace():
    seen = []

    class Sink(logging.Handler):
        def emit(self, record):
            seen.append((record.ember_event, record.ember_payload))

    events = logging.getLogger("ember.events")
    sink, level = Sink(logging.DEBUG), events.level
    events.addHandler(sink)
    events.setLevel(logging.DEBUG)
    try:
        fake_clock({"inductor": 0.1})
        ember.compile(f, backend="autotune", options=fast_options())(
            torch.randn(6, 8), torch.randn(8, 8)
        )
    finally:
        events.removeHandler(sink)
        events.setLevel(level)
    (payload,) = [p for kind, p in seen if kind == "autotune"]
    assert payload["choice"] == "inductor" and payload["source"] == "timed"
    assert payload["timings_ms"]["inductor"] == 100.0


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"candidates": ["eager", "tvm"]}, "unknown autotune candidate(s) ['tvm']; allowed: eager"),
        ({"candidates": "eager"}, "must be a non-empty list"),
        ({"time_budget_s": -1}, "'time_budget_s' must be a number >= 0"),
        ({"max_runs": 0}, "'max_runs' must be an int >= 1"),
        ({"budget": 1.0}, "also takes ['candidates', 'time_budget_s'"),
        ({"min_runs": 0}, "'min_runs' must be an int >= 1"),
    ],
)
def test_bad_options_are_typed_errors(options, says):
    with pytest.raises(autotune.AutotuneOptionError) as error:
        ember.compile(f, backend="autotune", options=options)
    assert says in str(error.value)
    assert isinstance(error.value, ember.exc.EmberError)


def test_max_autotune_is_a_candidate_only_on_request_and_only_on_cuda():
    assert "max-autotune" not in autotune.autotune_plan().applicable({"cuda"})
    assert "max-autotune" in autotune.autotune_plan("max-autotune").applicable({"cuda"})
    on_cpu = autotune.autotune_plan("max-autotune").applicable({"cpu"})
    assert on_cpu == ["eager", "aot_eager", "inductor"]
    assert autotune.autotune_plan().applicable({"cuda"})[-1] == "inductor-cudagraphs"


CHILD = textwrap.dedent(
    """
    import json, torch, ember
    from ember.backends import autotune
    from ember.backends.autotune_timing import set_measure

    def measure(name, run):  # inductor wins, so a reused decision is visible as inductor
        run()
        return {"inductor": 0.1}.get(name, 1.0)

    set_measure(measure)

    def f(x, y):
        return torch.relu(x @ y).sin() + y.sum(0)

    x, y = torch.randn(6, 8), torch.randn(8, 8)
    options = {"time_budget_s": 0.0, "warmup": 1, "min_runs": 1, "max_runs": 2}
    out = ember.compile(f, backend="autotune", options=options)(x, y)
    torch.testing.assert_close(out, f(x, y))
    (decision,) = autotune.last_decisions()
    print(json.dumps({"source": decision.source, "choice": decision.choice,
                      **ember.counters["autotune"]}))
    """
)


def test_a_second_process_reuses_the_stored_decision_without_timing(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "shared")}
    env.pop("EMBER_ARTIFACT_CACHE")

    def child() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=False
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = child(), child()
    assert first["source"] == "timed" and first["timing_runs"] == 3  # one round
    assert second == {
        "source": "stored", "choice": "inductor", "graphs": 1, "stored": 1, "kept_inductor": 1
    }  # fmt: skip


def test_store_off_times_again_in_process():
    fake_clock({"eager": 0.1})
    x, y = torch.randn(6, 8), torch.randn(8, 8)
    for _ in range(2):
        ember.reset()
        ember.compile(f, backend="autotune", options=fast_options())(x, y)
    assert [d.source for d in autotune.last_decisions()] == ["timed", "timed"]
