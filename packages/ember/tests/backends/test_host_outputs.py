"""On a real GPU, an optimizer step whose step counts stay on the CPU compiles (its CPU
outputs cut into a host graph by ember_aot_autograd.passes.split_host_outputs) instead of
running as an FX graph."""

from __future__ import annotations

import pytest
import torch

import ember


def _adamw_steps(model: torch.nn.Module, compiled: bool, mode=None) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x):
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    run = ember.compile(step, mode=mode) if compiled else step
    for k in range(4):
        run(torch.full((4, 8), 0.1 * (k + 1), device="cuda"))
    return optimizer


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_an_optimizer_with_cpu_step_counts_compiles_on_the_gpu(mode, monkeypatch, tmp_path):
    # compiled afresh (counted): a cache of its own, one for both modes (a process keeps its
    # compile workers, which keep the cache root they started with)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path.parent / "host-outputs-cache"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    twin.load_state_dict(model.state_dict())
    ember.reset()
    _adamw_steps(model.cuda(), compiled=False)
    optimizer = _adamw_steps(twin.cuda(), compiled=True, mode=mode)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    for state in optimizer.state.values():  # the counts stay CPU tensors, written in place
        assert state["step"].device.type == "cpu" and state["step"].item() == 4
    stats = ember.counters
    assert stats["inductor"]["host_output_splits"] >= 1, dict(stats["inductor"])
    assert not stats["inductor_fallbacks"].get("mixed_device_graph"), dict(
        stats["inductor_fallbacks"]
    )
    if mode is None:  # parameters, moments (device graph), counts (host graph) in place
        assert stats["inductor"]["outputs_written_in_place"] >= 4 * 4, dict(stats["inductor"])
    else:  # forward and backward captured; the step runs in place (compiled as above)
        captures = stats["cudagraphs"]
        assert captures["captures"] >= 2 and captures["in_place_graphs_uncaptured"] >= 1, dict(
            captures
        )
