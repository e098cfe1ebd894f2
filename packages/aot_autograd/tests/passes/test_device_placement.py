"""CPU work computed only from CPU scalars moves to the graph's other device ("meta" stands in
for the GPU here: the pass only reads devices)."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember_aot_autograd.passes import move_scalar_work

aten = torch.ops.aten


def _graph(cpu_output: bool = False, cpu_data: bool = False) -> torch.fx.GraphModule:
    mode = FakeTensorMode()
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.empty(2, 3, device="meta"))
    s = graph.placeholder("s")
    s.meta["val"] = mode.from_tensor(torch.empty(2) if cpu_data else torch.tensor(5))
    plus = graph.call_function(aten.add.Tensor, (s, 1))
    plus.meta["val"] = mode.from_tensor(torch.empty(2) if cpu_data else torch.tensor(6))
    wide = graph.call_function(aten.expand.default, (plus, [2, 3]))
    wide.meta["val"] = mode.from_tensor(torch.empty(2, 3))
    y = graph.call_function(aten.mul.Tensor, (x, wide))
    y.meta["val"] = mode.from_tensor(torch.empty(2, 3, device="meta"))
    graph.output((y, wide) if cpu_output else (y,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _devices(gm):
    names = {aten.add.Tensor: "add", aten.expand.default: "expand", aten.mul.Tensor: "mul"}
    return {
        names.get(n.target, n.name): n.meta["val"].device.type
        for n in gm.graph.nodes
        if "val" in n.meta
    }


def test_scalar_derived_cpu_work_moves():
    gm = _graph()
    assert move_scalar_work(gm) == (2, "")
    devices = _devices(gm)
    assert devices["add"] == devices["expand"] == "meta" and devices["s"] == "cpu", devices


def test_cpu_output_or_cpu_data_keeps_the_graph_as_it_is():
    for gm in (_graph(cpu_output=True), _graph(cpu_data=True)):
        before = _devices(gm)
        moved, reason = move_scalar_work(gm)
        assert moved == 0 and reason
        assert _devices(gm) == before


def _from_constant(name: str, value: torch.Tensor, chain: list, combine) -> tuple:
    """A graph of a GPU ("meta") input `x` and a 0-dim CPU constant `name` passed through
    `chain` ([(op, more args, example value)]), then `combine(x, last)`; with the chain's
    nodes."""
    mode = FakeTensorMode()
    root = torch.nn.Module()
    setattr(root, name, value)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.empty(3, device="meta"))
    node = graph.get_attr(name)
    node.meta["val"] = value
    nodes = []
    for op, more, example in chain:
        node = graph.call_function(op, (node, *more))
        node.meta["val"] = mode.from_tensor(example)
        nodes.append(node)
    y = graph.call_function(combine, (x, node))
    y.meta["val"] = mode.from_tensor(torch.empty(3, device="meta"))
    graph.output((y,))
    return torch.fx.GraphModule(root, graph), nodes


def test_scalar_constants_move_along():
    wide = (aten.expand.default, ([3],), torch.empty(3, dtype=torch.int64))
    gm, nodes = _from_constant("offset", torch.tensor(3), [wide], aten.mul.Tensor)
    assert move_scalar_work(gm) == (1, "")
    assert gm.offset.device.type == "meta" and nodes[0].meta["val"].device.type == "meta"


def test_a_chain_of_scalars_from_a_constant_moves():
    """DeBERTa-v2's attention scale, sqrt(tensor(head_dim) * factor): only 0-dim values, but
    a GPU kernel reads them, and it cannot read a CPU buffer."""
    chain = [
        (aten.mul.Tensor, (2.0,), torch.tensor(128.0)),
        (aten.sqrt.default, (), torch.tensor(11.3)),
    ]
    gm, nodes = _from_constant("head_dim", torch.tensor(64.0), chain, aten.div.Tensor)
    assert move_scalar_work(gm) == (2, "")
    assert gm.head_dim.device.type == "meta"
    assert [n.meta["val"].device.type for n in nodes] == ["meta", "meta"]
