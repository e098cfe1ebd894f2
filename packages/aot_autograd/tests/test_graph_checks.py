import pytest
import torch

from ember_aot_autograd import (
    GraphNotFunctionalError,
    MissingMetadataError,
    assert_functional,
    assert_has_val,
    trace_to_aten,
)

aten = torch.ops.aten


def _graph_with(target, args):
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(target, (x, *args))
    graph.output((node,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_checker_names_inplace_ops():
    with pytest.raises(GraphNotFunctionalError, match=r"add_\.Tensor"):
        assert_functional(_graph_with(aten.add_.Tensor, (1,)))
    assert_functional(_graph_with(aten.add.Tensor, (1,)))


def test_checker_sees_batch_norm_updating_running_stats():
    graph = torch.fx.Graph()
    x, mean, var = (graph.placeholder(n) for n in ("x", "mean", "var"))
    bn = graph.call_function(
        aten.native_batch_norm.default, (x, None, None, mean, var, True, 0.1, 1e-5)
    )
    graph.output((bn,))
    with pytest.raises(GraphNotFunctionalError, match="native_batch_norm"):
        assert_functional(torch.fx.GraphModule(torch.nn.Module(), graph))


def test_missing_val_is_named():
    with pytest.raises(MissingMetadataError, match="x"):
        assert_has_val(_graph_with(aten.add.Tensor, (1,)))


def test_autograd_bookkeeping_is_dropped():
    gm = trace_to_aten(lambda x: x.detach() * 2, [torch.randn(2)])
    assert aten.detach.default not in [n.target for n in gm.graph.nodes]
