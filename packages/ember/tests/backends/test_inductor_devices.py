"""Which graphs the inductor backend generates code for, by the devices of their values."""

from __future__ import annotations

import torch

from ember.backends.inductor_target import cpu_work as _cpu_work


def _graph(cpu_shape: list[int], cpu_output: bool) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(3, device="meta")  # stands in for a CUDA value
    scale = graph.call_function(torch.ops.aten.full.default, ([*cpu_shape], 2.0))
    scale.meta["val"] = torch.empty(cpu_shape)
    y = graph.call_function(torch.ops.aten.mul.Tensor, (x, scale))
    y.meta["val"] = torch.empty(3, device="meta")
    graph.output((y, scale) if cpu_output else (y,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_cpu_scalars_are_not_work():
    assert _cpu_work(_graph([], cpu_output=False)) is None


def test_cpu_tensor_is_named_in_the_reason():
    reason = _cpu_work(_graph([3], cpu_output=False))
    assert reason is not None and "full" in reason and "cpu torch.float32[3]" in reason


def test_cpu_output_counts_as_work():
    reason = _cpu_work(_graph([], cpu_output=True))
    assert reason is not None and reason.startswith("output ")
