"""Functionalization: mutations become out-of-place ops; input mutations are copied back."""

import pytest
import torch

from conftest import CountingCompiler, check_against_eager
from ember_aot_autograd import UnsupportedOpError, aot_function, trace_to_aten

aten = torch.ops.aten


def mutated_inputs(fn, inputs):
    return trace_to_aten(fn, inputs).meta["ember_aot"].mutated_inputs


def test_add_on_an_input_is_copied_back():
    def f(x):
        x.add_(1)
        return x * 2

    assert mutated_inputs(f, [torch.zeros(3)]) == [0]
    check_against_eager(f, [torch.randn(3)])


def test_mutation_through_a_view():
    def f(x):
        y = x.view(-1)
        y.mul_(2)
        return x + 1

    check_against_eager(f, [torch.randn(2, 3)])


def test_index_assignment():
    def f(x):
        x[0] = 3
        x[1:, 1] += 1
        return x.sum(0)

    check_against_eager(f, [torch.randn(3, 3)])


def test_views_of_mutated_tensor_see_the_mutation():
    def f(x):
        a = x * 1
        col = a[:, 0]
        row = a[1]
        row.fill_(5)
        return col.clone(), a

    check_against_eager(f, [torch.randn(3, 3)])


def test_out_variant():
    def f(x, y):
        out = torch.empty(3)
        torch.add(x, y, out=out)
        return out * 2

    check_against_eager(f, [torch.randn(3), torch.randn(3)])


def test_input_version_counter_is_bumped():
    def f(x):
        x.add_(1)
        return (x + 0,)

    compiled = aot_function(f, CountingCompiler())
    x = torch.zeros(2)
    before = x._version
    compiled(x)
    assert x._version > before
    torch.testing.assert_close(x, torch.ones(2))


def test_batchnorm_training_updates_running_stats():
    bn = torch.nn.BatchNorm1d(4)
    x = torch.randn(8, 4)

    def f(x, w, b, mean, var):
        return torch.nn.functional.batch_norm(x, mean, var, w, b, training=True, momentum=0.3)

    inputs = [x.requires_grad_(), bn.weight, bn.bias, bn.running_mean, bn.running_var]
    assert mutated_inputs(f, inputs) == [3, 4]
    check_against_eager(f, inputs)


def test_functional_graph_has_no_inplace_ops():
    def f(x, y):
        z = x.clone()
        z.mul_(y).add_(1).relu_()
        z[0].zero_()
        return z

    gm = trace_to_aten(f, [torch.randn(2, 2), torch.randn(2, 2)])
    assert not any(
        n.target._schema.is_mutable
        for n in gm.graph.nodes
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
    )
    check_against_eager(f, [torch.randn(2, 2), torch.randn(2, 2)])


def test_inplace_on_intermediates_with_autograd(partition_fn):
    def f(x):
        y = x * 2
        y.add_(1)
        y.relu_()
        return (y * y).sum()

    check_against_eager(f, [torch.randn(5, requires_grad=True)], partition_fn)


def test_metadata_mutation_of_a_temporary_is_its_view(partition_fn):
    # aten's matmul squeezes its own result in place (a vector operand), quantile too
    def f(x):
        y = x * 2
        y.t_()
        z = y.unsqueeze_(0).squeeze_(0) + 1
        return z * y, y.shape[0]

    check_against_eager(f, [torch.randn(2, 3, requires_grad=True)], partition_fn)
    gm = trace_to_aten(f, [torch.randn(2, 3)])
    assert not any(str(n.target).endswith("_.default") for n in gm.graph.nodes)


def test_metadata_mutation_of_an_input_is_refused():
    def f(x):
        x.t_()  # the caller would see the new sizes: not replayed
        return x * 1

    with pytest.raises(UnsupportedOpError, match=r"t_.*sizes or strides.*graph input"):
        trace_to_aten(f, [torch.randn(2, 3)])


def test_dtype_promotion_rules_of_inplace_ops_match_eager():
    def f(x):
        x.add_(1.5)
        return x

    with pytest.raises(RuntimeError):
        f(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        trace_to_aten(f, [torch.zeros(2, dtype=torch.int64)])


def test_inplace_result_the_written_dtype_cannot_hold_is_refused():
    # found by tools/fuzz_tracer.py: the meta kernel of mul_ does not check the cast, and the
    # functional mul plus its copy back would truncate where eager raises
    def f(x):
        x.mul_(0.5)
        return x + 1

    with pytest.raises(RuntimeError, match="can't be cast"):
        f(torch.ones(2, dtype=torch.int64))
    with pytest.raises(UnsupportedOpError, match="can't be cast"):
        trace_to_aten(f, [torch.ones(2, dtype=torch.int64)])
    check_against_eager(f, [torch.randn(3)])  # float32: no cast, traced as before


def test_writing_values_that_require_grad_into_an_input(partition_fn):
    # eager: y does not require grad until x is added into it; then y's readers (the loss
    # below reads y itself) differentiate through the add
    def f(x, y):
        y.add_(x)
        return y * 2

    _, fw, bw = check_against_eager(
        f, [torch.randn(3, requires_grad=True), torch.randn(3)], partition_fn
    )
    assert fw.calls == 1 and bw.calls == 1


def _activation_written_in_place(partition_fn, backend_fn):
    """A ReLU(inplace=True) at a graph boundary: the compiled function writes an activation
    (a non-leaf that requires grad) that its caller reads afterwards, as in a ResNet split
    into graphs at module frames. Outputs, the written activation and the weight's gradient
    must equal eager's."""
    torch.manual_seed(0)
    w = torch.randn(6, 6, requires_grad=True)
    x = torch.randn(4, 6)

    def part(y, z):
        y.relu_()
        z.mul_(y)  # another write, of a value computed from the first
        return (y * y).sum(1) + z.cos().sum(1)  # saves the written value for backward

    results = []
    for fn in (part, backend_fn(part)):
        w.grad = None
        y = x @ w
        z = x @ w.t()
        out = fn(y, z)
        (out.sum() + (y * 3).sum() + z.sin().sum()).backward()
        results.append([out.detach(), y.detach(), z.detach(), w.grad.clone()])
    for got, expected in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, expected)


def test_an_activation_written_in_place_differentiates_like_eager(partition_fn):
    def compile_it(fn):
        return aot_function(fn, CountingCompiler(), CountingCompiler(), partition_fn=partition_fn)

    _activation_written_in_place(partition_fn, compile_it)


def test_writing_a_leaf_that_requires_grad_fails_as_in_eager():
    def f(x):
        x.relu_()
        return x * 2

    compiled = aot_function(f, CountingCompiler(), CountingCompiler())
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f(torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compiled(torch.randn(3, requires_grad=True))


def test_aliased_inputs_with_mutation_write_the_shared_storage():
    base, eager_base = torch.zeros(4), torch.zeros(4)

    def f(x, y):
        y.add_(1)
        return x + 1

    torch.testing.assert_close(
        aot_function(f, CountingCompiler())(base, base[:2]), f(eager_base, eager_base[:2])
    )
    torch.testing.assert_close(base, eager_base)
