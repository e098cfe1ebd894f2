import pytest
import torch

from ember_aot_autograd import (
    UndecomposedOpError,
    UnsupportedOpError,
    assert_functional,
    assert_has_val,
    trace_to_aten,
)

aten = torch.ops.aten


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def run_graph(gm, inputs):
    return gm(*[x for x in inputs if isinstance(x, torch.Tensor)])


def test_records_aten_ops_with_val_on_every_node():
    def f(x, y):
        return torch.nn.functional.linear(x, y).relu() + 1

    x, w = torch.randn(3, 4), torch.randn(5, 4)
    gm = trace_to_aten(f, [x, w])
    assert_has_val(gm)
    assert_functional(gm)
    assert all(isinstance(t, torch._ops.OpOverload) for t in targets(gm))
    assert aten.relu.default in targets(gm)
    (out,) = run_graph(gm, [x, w])
    torch.testing.assert_close(out, f(x, w))
    # each node's val matches what eager computes for that node
    interpreter_values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            interpreter_values[n] = super().run_node(n)
            return interpreter_values[n]

    Recorder(gm).run(x, w)
    for node, value in interpreter_values.items():
        if isinstance(value, torch.Tensor):
            assert node.meta["val"].shape == value.shape, node
            assert node.meta["val"].dtype == value.dtype, node


def test_traces_under_fake_tensors_without_real_compute():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return x * 2

    trace_to_aten(f, [torch.randn(2)])
    assert calls == ["FakeTensor"]


def test_torch_level_graph_module_is_lowered():
    class M(torch.nn.Module):
        def forward(self, x):
            return (torch.softmax(x, -1) * x.sum(),)

    gm = torch.fx.symbolic_trace(M())
    x = torch.randn(2, 3)
    aten_gm = trace_to_aten(gm, [x])
    assert aten._softmax.default in targets(aten_gm)
    torch.testing.assert_close(run_graph(aten_gm, [x])[0], gm(x)[0])


def test_constants_created_in_the_trace_become_attributes():
    def f(x):
        return x + torch.tensor([1.0, 2.0, 3.0])

    gm = trace_to_aten(f, [torch.zeros(3)])
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(attrs) == 1 and "val" in attrs[0].meta
    assert gm.meta["ember_aot"].report.constants == 1
    torch.testing.assert_close(run_graph(gm, [torch.zeros(3)])[0], torch.tensor([1.0, 2.0, 3.0]))


def test_real_tensor_requiring_grad_inside_trace_raises():
    w = torch.randn(3, requires_grad=True)
    with pytest.raises(UnsupportedOpError, match="requires grad"):
        trace_to_aten(lambda x: x * w, [torch.randn(3)])


def test_op_returning_a_sparse_tensor_is_refused_as_a_declared_limitation():
    # gather(sparse_grad=True)'s backward builds a sparse COO gradient: no storage, no prims
    def f(grad, index):
        return torch.ops.aten.gather_backward(grad, torch.zeros(4, 6), 1, index, True)

    index = torch.randint(6, (4, 2))
    assert f(torch.ones(4, 2), index).layout == torch.sparse_coo  # eager runs it
    with pytest.raises(UnsupportedOpError, match="sparse_coo tensor"):
        trace_to_aten(f, [torch.ones(4, 2), index])


def _addmm(bias, a, b, *, beta=1, alpha=1):
    return beta * bias + alpha * torch.mm(a, b)


def _gelu(x, approximate="none"):
    assert approximate == "none"
    return 0.5 * x * (1 + torch.erf(x / 2**0.5))


LOCAL_TABLE = {aten.addmm.default: _addmm, aten.gelu.default: _gelu}


def test_local_decomposition_table_is_applied():
    def f(x, w, b):
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))

    inputs = [torch.randn(4, 3), torch.randn(5, 3), torch.randn(5)]
    gm = trace_to_aten(f, inputs, LOCAL_TABLE)
    found = targets(gm)
    assert aten.addmm.default not in found and aten.gelu.default not in found
    assert aten.mm.default in found and aten.erf.default in found
    report = gm.meta["ember_aot"].report
    assert report.decomposed == {"aten.addmm.default": 1, "aten.gelu.default": 1}
    assert report.undecomposed["aten.mm.default"] == 1
    torch.testing.assert_close(run_graph(gm, inputs)[0], f(*inputs))


def test_strict_names_the_undecomposed_op():
    with pytest.raises(UndecomposedOpError, match=r"aten\.sin\.default"):
        trace_to_aten(lambda x: x.sin(), [torch.randn(2)], LOCAL_TABLE, strict=True)


def test_decompositions_apply_recursively():
    table = {aten.gelu.default: _gelu, aten.erf.default: lambda x: torch.tanh(x * 1.2)}
    gm = trace_to_aten(torch.nn.functional.gelu, [torch.randn(3)], table)
    assert aten.erf.default not in targets(gm) and aten.tanh.default in targets(gm)


def test_data_dependent_python_value_raises_a_clear_error():
    def f(x):
        return x * 2 if x.sum() > 0 else x

    with pytest.raises(UnsupportedOpError, match=r"_local_scalar_dense.*data-dependent"):
        trace_to_aten(f, [torch.randn(3)])


@pytest.mark.parametrize("decompose", [False, True])
def test_vmap_with_python_numbers_traces_into_batched_ops(decompose):
    # under torch.vmap the batching rules hand the mode `x + 1`'s wrapped number as the
    # number itself; the trace takes it as the 0-dim tensor it stood for
    table = None
    if decompose:  # the prim decompositions read `self`'s dtype (their package: an extra)
        table = pytest.importorskip(
            "ember_primops", reason="needs ember-primops"
        ).decomposition_table()

    def f(x, w):
        return torch.vmap(lambda r: (r * w).sum() * 0.5 + 1, in_dims=1)(x) - 2

    x, w = torch.randn(4, 6), torch.randn(4)
    gm = trace_to_aten(f, [x, w], decompositions=table)
    assert_functional(gm)
    (out,) = run_graph(gm, [x, w])
    torch.testing.assert_close(out, f(x, w))


def test_vmap_keeps_a_python_float_in_double_precision():
    def f(x):
        return torch.vmap(lambda r: r * 0.1 + 1e-9)(x)

    x = torch.randn(3, 2, dtype=torch.float64)
    gm = trace_to_aten(f, [x])
    (out,) = run_graph(gm, [x])
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, f(x), rtol=0, atol=0)
