"""Both partitioners: valid forward/backward graphs, saved values, and their bytes."""

import operator

import torch

from ember_aot_autograd import (
    assert_functional,
    assert_has_val,
    default_partition,
    min_cut_rematerialization_partition,
    partition_report,
    trace_joint,
)
from ember_aot_autograd.partition.mincut import is_recomputable

aten = torch.ops.aten


def pointwise_heavy(x, w):
    y = x @ w
    return ((y.sin() * y.cos()).exp() + y.sigmoid()).tanh().sum()


def inputs():
    return [torch.randn(16, 16), torch.randn(16, 16, requires_grad=True)]


def test_graphs_are_functional_with_metadata():
    joint = trace_joint(pointwise_heavy, inputs())
    for partition_fn in (default_partition, min_cut_rematerialization_partition):
        part = partition_fn(joint)
        for gm in (part.fw_gm, part.bw_gm):
            assert_functional(gm)
            assert_has_val(gm)


def test_joint_graph_layout():
    joint = trace_joint(pointwise_heavy, inputs())
    names = [n.name for n in joint.gm.graph.nodes if n.op == "placeholder"]
    assert names == ["primals_0", "primals_1", "tangents_0"]
    assert joint.tangent_outputs == [0] and joint.grad_inputs == [1]


def test_min_cut_saves_fewer_bytes_than_default_on_pointwise_chains():
    reports = partition_report(pointwise_heavy, inputs())
    default, min_cut = reports["default"], reports["min_cut"]
    assert min_cut.saved_activation_bytes < default.saved_activation_bytes
    # the matmul result is saved (never recomputed); the pointwise chain is recomputed
    assert min_cut.saved_activation_bytes == 16 * 16 * 4
    assert min_cut.backward_ops > default.backward_ops


def test_partitions_compute_the_eager_gradient():
    x, w = inputs()
    expected = torch.autograd.grad(pointwise_heavy(x, w), w)[0]
    joint = trace_joint(pointwise_heavy, [x, w])
    for partition_fn in (default_partition, min_cut_rematerialization_partition):
        part = partition_fn(joint)
        outputs = part.fw_gm(x, w)
        saved = outputs[part.num_fw_outputs :]
        (grad,) = part.bw_gm(*saved, torch.ones(()))
        torch.testing.assert_close(grad, expected)


def test_random_and_expensive_ops_are_never_recomputed():
    def f(x, w):
        y = torch.nn.functional.dropout(x @ w, 0.5, True)
        return (y * 2).sum()

    joint = trace_joint(f, inputs())
    nodes = {n.target: n for n in joint.gm.graph.nodes if n.op == "call_function"}
    assert not is_recomputable(nodes[aten.mm.default])
    assert not is_recomputable(nodes[aten.bernoulli.p])
    assert is_recomputable(nodes[aten.mul.Tensor])
    bw = min_cut_rematerialization_partition(joint).bw_gm
    bw_targets = {n.target for n in bw.graph.nodes}
    assert aten.bernoulli.p not in bw_targets and aten.mm.default in bw_targets  # grad mm only
    fw_mms = sum(n.target is aten.mm.default for n in joint.gm.graph.nodes)
    assert fw_mms == 2  # forward mm + weight-gradient mm; none added by recomputation
    bw_mms = sum(n.target is aten.mm.default for n in bw.graph.nodes)
    assert bw_mms == 1


def test_multi_output_ops_are_saved_by_item():
    def f(x, w, b):
        return torch.nn.functional.layer_norm(x, (16,), w, b).sum()

    joint = trace_joint(
        f,
        [
            torch.randn(4, 16, requires_grad=True),
            torch.randn(16, requires_grad=True),
            torch.randn(16),
        ],
    )
    for partition_fn in (default_partition, min_cut_rematerialization_partition):
        part = partition_fn(joint)
        placeholders = [n for n in part.bw_gm.graph.nodes if n.op == "placeholder"]
        assert all(isinstance(n.meta["val"], torch.Tensor) for n in placeholders)
        assert not any(
            n.target is operator.getitem and n.args[0].op == "placeholder"
            for n in part.bw_gm.graph.nodes
        )


def scaled_by_a_factory_table(x):
    # the backward needs only `table`, computed from no input: min-cut's flow network then has
    # no edge out of its source (the t5 training graph on the GPU hit this)
    table = torch.arange(16.0).reshape(4, 4).exp()
    return (x * table).sum()


def test_min_cut_handles_a_backward_that_reads_only_factory_values():
    x = torch.randn(4, 4, requires_grad=True)
    joint = trace_joint(scaled_by_a_factory_table, [x])
    # every op recomputable: no node of the region is tied to the source
    part = min_cut_rematerialization_partition(joint, recomputable=lambda node: True)
    assert_functional(part.bw_gm)
    (grad,) = torch.autograd.grad(scaled_by_a_factory_table(x), x)
    torch.testing.assert_close(grad, torch.arange(16.0).reshape(4, 4).exp())
    fw_out = part.fw_gm(x.detach())
    bw_in = [*fw_out[1:], torch.ones(())]  # saved values, then the tangent
    (bw_grad,) = [g for g in part.bw_gm(*bw_in) if g is not None]
    torch.testing.assert_close(bw_grad, grad)


def two_layers(x, w1, w2):
    h = (x @ w1).sin()
    return (h * w2).sum()  # h's backward reader is pointwise: recomputed


def test_switched_off_a_value_a_backward_matmul_reads_is_recomputed(monkeypatch):
    from ember_aot_autograd.partition import mincut

    monkeypatch.setattr(mincut, "SAVE_LIBRARY_OPERANDS", False)
    args = _matrices()
    part = min_cut_rematerialization_partition(trace_joint(mlp, args))
    assert [n for n in part.bw_gm.graph.nodes if n.target is aten.sin.default]
    _assert_eager_gradients(part, mlp, args)


def _matrices():
    return [torch.randn(8, 8), torch.randn(8, 8, requires_grad=True),
            torch.randn(8, 8, requires_grad=True)]  # fmt: skip


def _assert_eager_gradients(part, fn, args):
    """The partition's forward then backward give eager autograd's weight gradients."""
    expected = torch.autograd.grad(fn(*args), list(args[1:]))
    outputs = part.fw_gm(*args)
    grads = part.bw_gm(*outputs[part.num_fw_outputs :], torch.ones(()))
    torch.testing.assert_close(list(grads), list(expected))


def test_a_recomputed_value_is_made_just_before_its_first_backward_reader():
    args = _matrices()
    part = min_cut_rematerialization_partition(trace_joint(two_layers, args))
    nodes = list(part.bw_gm.graph.nodes)
    at = {n: k for k, n in enumerate(nodes)}
    # the hidden sine, a forward value recomputed from the saved product, is read first by
    # the second weight's gradient: made after the incoming gradient is, not at the start
    (sin,) = [n for n in nodes if n.target is aten.sin.default]
    (expand,) = [n for n in nodes if n.target is aten.expand.default]  # of the tangent
    assert at[sin] > at[expand], part.bw_gm.graph
    assert all(at[dep] < at[n] for n in nodes for dep in n.all_input_nodes)
    _assert_eager_gradients(part, two_layers, args)


def gathered(x, idx, w):
    return (x[idx].sin() * w).sum()


def test_min_cut_recomputes_a_gather_rather_than_save_its_larger_result():
    # the backward reads sin(x[idx]) (4096 floats); x and idx are the inputs, free to save
    x, idx = torch.randn(8), torch.randint(0, 8, (4096,))
    w = torch.randn(4096, requires_grad=True)
    report = partition_report(gathered, [x, idx, w])["min_cut"]
    assert report.saved_activation_bytes == 0, report
    joint = trace_joint(gathered, [x, idx, w])
    assert any(is_recomputable(n) for n in joint.gm.graph.nodes if n.target == aten.index.Tensor)


def mlp(x, w1, w2):
    h = (x @ w1).sin()
    return ((h @ w2).cos() * 2).sum()


def test_a_value_a_backward_matmul_reads_is_saved_not_recomputed():
    """The second weight's gradient is a matmul reading h (through a transpose): recomputed,
    h would be computed and written in full in the backward; the forward wrote it already
    for its own matmul, so it is saved (the sine runs once)."""
    args = _matrices()
    part = min_cut_rematerialization_partition(trace_joint(mlp, args))
    assert not [n for n in part.bw_gm.graph.nodes if n.target is aten.sin.default]
    _assert_eager_gradients(part, mlp, args)


def conv_relu_conv(x, w1, w2):
    h = torch.relu(torch.nn.functional.conv2d(x, w1, padding=1))
    return torch.nn.functional.conv2d(torch.cat([x, h], 1), w2).square().sum()


def test_a_value_a_backward_convolution_reads_is_saved():
    """The concatenation feeds the second convolution, whose weight gradient reads it: saved
    (ESE-VoVNet recomputed its concatenations of batch norm + ReLU outputs in the backward)."""
    args = [torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3, requires_grad=True),
            torch.randn(5, 7, 1, 1, requires_grad=True)]  # fmt: skip
    part = min_cut_rematerialization_partition(trace_joint(conv_relu_conv, args))
    assert not [n for n in part.bw_gm.graph.nodes if n.target is aten.cat.default]
    _assert_eager_gradients(part, conv_relu_conv, args)
