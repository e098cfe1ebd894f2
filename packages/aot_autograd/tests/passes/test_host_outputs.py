"""A GPU graph's CPU outputs split into a host graph ("meta" stands in for the GPU: the split
only reads devices). The umbrella's tests compile an optimizer step this way on a GPU."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember_aot_autograd.passes import PASSES, HostSplit, split_host_outputs

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


def test_both_passes_are_registered_by_name():
    assert PASSES["host_outputs"].run is split_host_outputs
    assert "device_placement" in PASSES and all(p.doc for p in PASSES.values())
