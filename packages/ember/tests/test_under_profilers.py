"""A compiled model runs compiled under profilers (cProfile, torch.profiler with Python
stacks), compiled there or before: a profile shows the program that really runs."""

from __future__ import annotations

import cProfile
import pstats

import torch
from torch.profiler import ProfilerActivity, profile

import ember
from ember.stats import counters


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def test_compiles_and_runs_compiled_under_cprofile():
    model, x = _model(), torch.randn(8, 16)
    ember.reset()
    compiled = ember.compile(model)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        got = [compiled(x) for _ in range(3)]  # the first call compiles under the profiler
    finally:
        profiler.disable()
    assert counters["inductor"]["forward_graphs"] == 1
    assert counters["inductor"]["forward_runs"] == 3
    for out in got:
        torch.testing.assert_close(out, model(x))
    assert pstats.Stats(profiler).total_calls > 0


def test_runs_compiled_under_torch_profiler_with_stacks():
    model, x = _model(), torch.randn(8, 16, requires_grad=True)
    ember.reset()
    compiled = ember.compile(model)
    compiled(x).sum().backward()
    runs = counters["inductor"]["forward_runs"]
    with profile(activities=[ProfilerActivity.CPU], with_stack=True):
        out = compiled(x)
        out.sum().backward()
    assert counters["inductor"]["forward_runs"] == runs + 1
    assert counters["inductor"]["backward_runs"] == 2
    torch.testing.assert_close(out, model(x))
