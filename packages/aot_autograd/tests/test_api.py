"""aot_function / aot_module against eager: outputs, gradients, variants, models."""

import pytest
import torch

from conftest import CountingCompiler, check_against_eager, clone_module, leaves
from ember_aot_autograd import aot_function, aot_module, min_cut_rematerialization_partition


def mlp(x, w1, b1, w2, b2):
    h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1))
    return torch.nn.functional.linear(h, w2, b2)


def mlp_inputs():
    torch.manual_seed(0)
    return [
        torch.randn(4, 8),
        torch.randn(16, 8, requires_grad=True),
        torch.randn(16, requires_grad=True),
        torch.randn(3, 16, requires_grad=True),
        torch.randn(3, requires_grad=True),
    ]


def test_mlp(partition_fn):
    check_against_eager(mlp, mlp_inputs(), partition_fn)


class Block(torch.nn.Module):
    """A small pre-norm transformer block: attention by matmul/softmax, GELU MLP."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return (x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x)))),)


def _module_against_eager(module, inputs, partition_fn, train_steps=2, **tol):
    eager = clone_module(module)
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_module(module, inputs, fw, bw, partition_fn=partition_fn)
    for _ in range(train_steps):
        expected, actual = eager(*inputs), compiled(*inputs)
        expected_t = expected if isinstance(expected, torch.Tensor) else expected[0]
        actual_t = actual if isinstance(actual, torch.Tensor) else actual[0]
        torch.testing.assert_close(actual_t, expected_t, **tol)
        expected_t.square().sum().backward()
        actual_t.square().sum().backward()
        for (name, p), q in zip(module.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **tol, msg=name)
        for b, c in zip(module.buffers(), eager.buffers(), strict=True):
            torch.testing.assert_close(b, c, **tol)
    return fw, bw


def test_transformer_block(partition_fn):
    torch.manual_seed(0)
    fw, bw = _module_against_eager(
        Block(), [torch.randn(2, 5, 16)], partition_fn, atol=1e-5, rtol=1e-4
    )
    assert (fw.calls, bw.calls) == (1, 1)  # second step reuses the compiled variant


def test_batchnorm_module_training_and_eval(partition_fn):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    x = torch.randn(2, 3, 6, 6)
    _module_against_eager(model, [x], partition_fn, atol=1e-5, rtol=1e-4)
    model.eval()
    eager = clone_module(model)
    compiled = aot_module(model, [x], CountingCompiler())
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), eager(x))


def test_dropout_matches_eager_under_the_same_seed(partition_fn):
    def f(x, w):
        return torch.nn.functional.dropout(x @ w, p=0.5, training=True)

    x, w = torch.randn(6, 5), torch.randn(5, 7, requires_grad=True)
    compiled = aot_function(f, CountingCompiler(), partition_fn=partition_fn)
    w_eager, w_compiled = leaves([w, w])
    torch.manual_seed(123)
    expected = f(x, w_eager)
    torch.manual_seed(123)
    actual = compiled(x, w_compiled)
    torch.testing.assert_close(actual, expected)
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(w_compiled.grad, w_eager.grad)
    assert (actual == 0).any()  # dropout really dropped something
    torch.manual_seed(124)
    assert not torch.equal(compiled(x, w_compiled), actual)  # the mask follows the seed


def test_several_outputs_some_without_grad(partition_fn):
    def f(x, w):
        y = x @ w
        return y, y.argmax(-1), (y > 0), y.detach() * 2, y.sum()

    check_against_eager(f, [torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)], partition_fn)


def test_outputs_aliasing_inputs_share_storage():
    def f(x, y):
        return x.view(-1), x, x.t(), y * 2

    compiled = aot_function(f, CountingCompiler())
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(3)
    flat, same, transposed, _ = compiled(x, y)
    assert flat._base is x and transposed._base is x and same is x
    flat.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(2, 3))


def test_mutated_input_then_aliased_output():
    def f(x):
        x.mul_(2)
        return x[0]

    compiled = aot_function(f, CountingCompiler())
    x = torch.arange(6.0).view(2, 3)
    row = compiled(x)
    assert row.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, torch.arange(6.0).view(2, 3) * 2)


def test_non_tensor_outputs():
    def f(x):
        return {"y": x + 1, "n": 3, "none": None, "shape": x.shape}

    compiled = aot_function(f, CountingCompiler())
    out = compiled(torch.zeros(2, requires_grad=True))
    assert out["n"] == 3 and out["none"] is None and out["shape"] == (2,)
    out["y"].sum().backward()


def test_no_grad_call_traces_no_backward():
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(mlp, fw, bw)
    inputs = mlp_inputs()
    with torch.no_grad():
        out = compiled(*inputs)
    assert not out.requires_grad
    assert compiled.traces == {"inference": 1, "joint": 0} and bw.calls == 0
    compiled(*inputs).sum().backward()  # a training call afterwards: its own variant
    assert compiled.traces == {"inference": 1, "joint": 1} and bw.calls == 1
    with torch.no_grad():
        compiled(*inputs)
    assert compiled.traces == {"inference": 1, "joint": 1}  # cached
    assert inputs[1].grad is not None


def test_second_backward_raises_like_eager(partition_fn):
    compiled = aot_function(mlp, CountingCompiler(), partition_fn=partition_fn)
    out = compiled(*mlp_inputs()).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_retain_graph_allows_a_second_backward():
    inputs = mlp_inputs()
    compiled = aot_function(mlp, CountingCompiler())
    out = compiled(*inputs).sum()
    out.backward(retain_graph=True)
    first = inputs[1].grad.clone()
    out.backward()
    torch.testing.assert_close(inputs[1].grad, 2 * first)


def test_min_cut_saves_less_on_a_pointwise_heavy_function():
    def f(x, w):
        y = x @ w
        return (y.sin().cos().exp() * y.sigmoid()).tanh().sum()

    inputs = [torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)]
    check_against_eager(f, inputs, min_cut_rematerialization_partition)


def test_decompositions_reach_forward_and_backward_graphs(partition_fn):
    from test_tracer import LOCAL_TABLE

    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(mlp, fw, bw, LOCAL_TABLE, partition_fn)
    eager_in, compiled_in = leaves(mlp_inputs()), leaves(mlp_inputs())
    expected, actual = mlp(*eager_in), compiled(*compiled_in)
    torch.testing.assert_close(actual, expected)
    expected.sum().backward()
    actual.sum().backward()
    for e, a in zip(eager_in[1:], compiled_in[1:], strict=True):
        torch.testing.assert_close(a.grad, e.grad)
    fw_targets = {n.target for n in fw.graphs[0].graph.nodes}
    assert torch.ops.aten.addmm.default not in fw_targets
    assert torch.ops.aten.gelu.default not in fw_targets
    assert torch.ops.aten.erf.default in fw_targets
