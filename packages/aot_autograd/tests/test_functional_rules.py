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


def test_metadata_mutation_is_refused():
    def f(x):
        y = x * 1
        y.t_()
        return y

    with pytest.raises(UnsupportedOpError, match=r"t_.*sizes or strides"):
        trace_to_aten(f, [torch.randn(2, 3)])


def test_dtype_promotion_rules_of_inplace_ops_match_eager():
    def f(x):
        x.add_(1.5)
        return x

    with pytest.raises(RuntimeError):
        f(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        trace_to_aten(f, [torch.zeros(2, dtype=torch.int64)])


def test_mutating_an_input_that_requires_grad_is_refused():
    from ember_aot_autograd import InputMutationError, trace_joint

    def f(x, y):
        y.add_(x)
        return y * 1

    with pytest.raises(InputMutationError, match="input 1"):
        trace_joint(f, [torch.randn(2, requires_grad=True), torch.randn(2)])


def test_aliased_inputs_with_mutation_are_refused():
    from ember_aot_autograd import InputMutationError

    base = torch.zeros(4)

    def f(x, y):
        y.add_(1)
        return x + 1

    with pytest.raises(InputMutationError, match="shares storage"):
        trace_to_aten(f, [base, base[:2]])
