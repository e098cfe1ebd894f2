"""A GPU graph's CPU outputs split into a host graph ("meta" stands in for the GPU in the
graph-level tests: the split only reads devices); on a real GPU, an optimizer step whose
step counts stay on the CPU compiles instead of running as an FX graph."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ember
from ember.backends.host_outputs import HostSplit, split_host_outputs

aten = torch.ops.aten


def _node(graph, mode, target, args, example):
    node = graph.call_function(target, args)
    node.meta["val"] = mode.from_tensor(example)
    return node


def _optimizer_like(gpu_source: bool = False, random: bool = False) -> torch.fx.GraphModule:
    """step += 1 on the CPU; the GPU update reads 0.9 ** step; returns (update, step)."""
    mode = FakeTensorMode()
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.empty(3, device="meta"))
    step = graph.placeholder("step")
    step.meta["val"] = mode.from_tensor(torch.tensor(5.0))
    if gpu_source:  # the new count read back from the GPU: a transfer
        total = _node(graph, mode, aten.sum.default, (x,), torch.empty((), device="meta"))
        new_step = _node(graph, mode, aten._to_copy.default, (total,), torch.tensor(1.0))
    elif random:
        new_step = _node(graph, mode, aten.rand_like.default, (step,), torch.tensor(1.0))
    else:
        new_step = _node(graph, mode, aten.add.Tensor, (step, 1), torch.tensor(6.0))
    decay = _node(graph, mode, aten.pow.Scalar, (0.9, new_step), torch.tensor(1.0))
    update = _node(graph, mode, aten.mul.Tensor, (x, decay), torch.empty(3, device="meta"))
    graph.output((update, new_step))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_cpu_outputs_move_to_a_host_graph_of_their_own():
    gm = _optimizer_like()
    before = gm.code
    split = split_host_outputs(gm)
    assert gm.code == before  # both graphs are new (the aot cache keeps the graph's source)
    assert isinstance(split, HostSplit), split
    assert _targets(split.host) == [aten.add.Tensor]
    assert split.host_inputs == [1]
    assert split.host(torch.tensor(5.0)) == (torch.tensor(6.0),)
    # the device graph still computes what it reads from the count, itself
    assert _targets(split.device) == [aten.add.Tensor, aten.pow.Scalar, aten.mul.Tensor]
    assert split.device_inputs == [0, 1]
    (output,) = [n for n in split.device.graph.nodes if n.op == "output"]
    assert [n.target for n in output.args[0]] == [aten.mul.Tensor]
    assert split.places == [(False, 0), (True, 0)]


def test_the_runner_puts_outputs_back_in_order():
    split = split_host_outputs(_optimizer_like())
    run = split.runner(lambda step: [step + 1], lambda x, step: [x * 0.9 ** (step + 1)])
    update, step = run(torch.ones(3), torch.tensor(1.0))
    assert step == 2.0 and torch.allclose(update, torch.full((3,), 0.81))


def test_cpu_outputs_read_from_the_gpu_or_random_keep_the_graph_whole():
    for gm in (_optimizer_like(gpu_source=True), _optimizer_like(random=True)):
        before = _targets(gm)
        reason = split_host_outputs(gm)
        assert isinstance(reason, str) and reason
        assert _targets(gm) == before


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
