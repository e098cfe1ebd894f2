"""The inductor backend's backward is handed its inputs (aot's `owns_arguments`): its
wrapper empties the list and drops each saved activation after its last use, so that the
gradients made late in the backward do not stack on activations the backward is done with.
Results are eager's, a retained graph still backpropagates twice, and the figure that
matters, the step's peak memory, goes down."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import ember
import ember.backends.inductor_cache as inductor_cache

pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def _peak_bytes(step) -> int:
    """What one call allocates and holds at once (the CPU allocator's events, in order)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = prof.profiler.kineto_results.events()
    live = peak = 0
    for _, change in sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"):
        live += change
        peak = max(peak, live)
    return peak


def _training_step(model, x):
    compiled = ember.compile(model)

    def step():
        model.zero_grad(set_to_none=True)
        compiled(x).square().mean().backward()

    return step


def test_the_backward_releases_its_saved_activations_and_matches_eager():
    model, x = _mlp(), torch.randn(512, 1024)
    model.zero_grad()
    model(x).square().mean().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    step = _training_step(model, x)
    for _ in range(2):
        step()
        for p, e in zip(model.parameters(), expected, strict=True):
            torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-5)
    assert ember.counters["inductor"]["backward_graphs"] == 1


def test_a_retained_graph_backpropagates_twice():
    model, x = _mlp(), torch.randn(64, 1024, requires_grad=True)
    loss = model(x).square().mean()
    loss.backward(retain_graph=True)
    loss.backward()
    expected = x.grad.clone()
    x.grad = None
    model.zero_grad()
    loss = ember.compile(model)(x).square().mean()
    loss.backward(retain_graph=True)
    loss.backward()
    torch.testing.assert_close(x.grad, expected, rtol=1e-4, atol=1e-5)
    assert ember.counters["inductor"]["backward_runs"] == 2  # both through the compiled graph


def test_peak_memory_is_lower_than_when_the_backward_holds_its_inputs(monkeypatch):
    """Six 1024x1024 layers at batch 512: 2 MiB activations, 4 MiB weight gradients made
    from the last layer back. Held to the backward's end, every saved activation stayed
    under the gradients made on top of them; released, each goes as its layer is done."""
    x = torch.randn(512, 1024)
    peaks = {}
    for release in (False, True):
        ember.reset()
        monkeypatch.setattr(
            inductor_cache, "releases_inputs", lambda kind, s, r=release: r and kind == "backward"
        )
        step = _training_step(_mlp(), x)
        step(), step()
        peaks[release] = _peak_bytes(step)
    assert peaks[True] <= peaks[False] - 4 * 2**20, peaks
