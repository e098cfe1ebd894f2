"""Global-state queries and context managers in compiled code (issue 26, PyTorch's
test_ctx_manager.py): compiled under `inductor` (and `aot_eager`), compared with eager,
with graph counts checked so that a silent fallback fails."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    yield
    ember.reset()


def _graphs(backend: str) -> int:
    return ember.counters[backend]["forward_graphs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_profiler_state_query_retraces_under_the_profiler(backend):
    def fn(x):
        if torch.autograd._profiler_enabled():
            return x * 3
        return x - 1

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    with torch.autograd.profiler.profile():
        torch.testing.assert_close(compiled(x), fn(x))
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters[backend]["forward_runs"] >= 3, dict(ember.counters[backend])
    assert _graphs(backend) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_mode_query_retraces(backend):
    def fn(x):
        return x + 1 if torch.are_deterministic_algorithms_enabled() else x.sin()

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    torch.use_deterministic_algorithms(True)
    try:
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        torch.use_deterministic_algorithms(False)
    assert _graphs(backend) == 2
