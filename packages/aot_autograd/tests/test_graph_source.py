"""GraphSource: a prim graph as source text, its inputs' layouts and its constants, and back."""

from __future__ import annotations

import json

import pytest
import torch

from ember_aot_autograd import (
    GraphSource,
    NotSerializable,
    decode_tensor,
    encode_tensor,
    graph_from_source,
    graph_to_source,
)


@pytest.mark.parametrize(
    "value",
    [
        torch.tensor(3, dtype=torch.int64),
        torch.tensor(2.5),
        torch.arange(12.0).reshape(3, 4).t(),  # dense but not contiguous: strides kept
        torch.randn(2, 3).to(torch.bfloat16),
        torch.tensor([True, False, True]),
        torch.empty(0, 4),
    ],
    ids=["int64_scalar", "float_scalar", "transposed", "bf16", "bool", "empty"],
)
def test_tensor_round_trip_keeps_values_dtype_and_strides(value):
    data = json.loads(json.dumps(encode_tensor(value)))  # through JSON like the cache
    back = decode_tensor(data)
    assert back.dtype == value.dtype and back.shape == value.shape
    assert back.stride() == value.stride()
    torch.testing.assert_close(back, value, rtol=0, atol=0)


def test_overlapping_or_grad_tensors_are_refused():
    with pytest.raises(NotSerializable, match="overlapping"):
        encode_tensor(torch.randn(3, 1).expand(3, 4))
    with pytest.raises(NotSerializable, match="strided"):
        encode_tensor(torch.randn(3, requires_grad=True))


def _graph_with_constant(table: torch.Tensor) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    const = graph.get_attr("_tensor_constant0")
    graph.output((graph.call_function(torch.ops.aten.mul.Tensor, (x, const)),))
    root = torch.nn.Module()
    root._tensor_constant0 = table
    return torch.fx.GraphModule(root, graph)


def test_graph_with_constant_round_trips_and_runs():
    table = torch.tensor([1.0, -2.0, 3.0])
    gm = _graph_with_constant(table)
    x = torch.randn(2, 3)
    gm.graph.find_nodes(op="placeholder")[0].meta["val"] = x
    source = graph_to_source(gm)
    assert [name for name, _ in source.constants] == ["_tensor_constant0"]
    rebuilt = graph_from_source(GraphSource.from_data(json.loads(json.dumps(source.to_data()))))
    (out,) = rebuilt(x)
    torch.testing.assert_close(out, x * table)
    const_node = rebuilt.graph.find_nodes(op="get_attr")[0]
    assert const_node.meta["val"].shape == (3,)  # example value recorded like the tracer's


def test_identity_follows_constant_values_not_key_order():
    x = torch.randn(2, 3)
    sources = []
    for table in (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 4.0])):
        gm = _graph_with_constant(table)
        gm.graph.find_nodes(op="placeholder")[0].meta["val"] = x
        sources.append(graph_to_source(gm))
    assert sources[0].identity() != sources[1].identity()
    reordered = GraphSource.from_data(json.loads(json.dumps(sources[0].to_data(), sort_keys=True)))
    assert reordered.identity() == sources[0].identity()
