"""The per-call path of the runtime wrappers: graph inputs picked by a slice when they lead,
a flat tuple of graph outputs returned as is, everything else rebuilt by the output spec."""

import pytest
import torch
from torch.utils._pytree import tree_structure

from conftest import CountingCompiler, check_against_eager
from ember_aot_autograd import aot_function, aot_module
from ember_aot_autograd.api import _signature
from ember_aot_autograd.outputs import FromGraph, OutputSpec, SameAsInput
from ember_aot_autograd.plan import RunnerPlan
from ember_aot_autograd.runtime import _finisher, _selector


def test_leading_graph_inputs_are_a_slice_and_others_are_picked():
    args = (torch.ones(1), torch.ones(2), 3)
    assert _selector((0, 1))(args) == args[:2]
    picked = _selector((1,))(args)
    assert len(picked) == 1 and picked[0] is args[1]


def _plan(leaves, treespec, mutated=()):
    return RunnerPlan("inference", (0,), tuple(mutated), OutputSpec(tuple(leaves), treespec))


def test_a_flat_tuple_of_graph_outputs_is_returned_as_a_tuple():
    outs = [torch.ones(1), torch.zeros(1)]
    finish = _finisher(_plan([FromGraph(0), FromGraph(1)], tree_structure((0, 0))))
    got = finish((torch.ones(1),), outs)
    assert type(got) is tuple and got[0] is outs[0] and got[1] is outs[1]


def test_other_outputs_are_rebuilt_by_their_spec():
    x = torch.ones(2)
    outs = [torch.zeros(1), torch.ones(1)]
    swapped = _finisher(_plan([FromGraph(1), FromGraph(0)], tree_structure((0, 0))))
    assert swapped((x,), outs)[0] is outs[1]
    as_list = _finisher(_plan([FromGraph(0)], tree_structure([0])))
    assert as_list((x,), outs) == [outs[0]]
    alias = _finisher(_plan([SameAsInput(0)], tree_structure((0,))))
    assert alias((x,), outs)[0] is x
    nested = _finisher(_plan([FromGraph(0)], tree_structure(((0,),))))
    assert nested((x,), outs) == ((outs[0],),)


def test_outputs_and_written_inputs_match_eager():
    def f(flag, x, y):
        y.add_(1)
        return {"a": x * 2, "b": (x.sin(), x[:1])}, flag

    check_against_eager(f, [True, torch.randn(3), torch.randn(3)])
    check_against_eager(
        lambda x, w: (x @ w, (x @ w).relu()),
        [torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)],
    )


def test_signature_keys_equal_shapes_alike():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert _signature([a, 1]) == _signature([b, 1])
    assert hash(_signature([a])) == hash(_signature([b]))
    assert _signature([a]) != _signature([torch.randn(3, 2)])
    assert _signature([a]) != _signature([a.double()])
    assert _signature([a]) != _signature([a.clone().requires_grad_()])
    with torch.no_grad():
        without_grad = _signature([b])
    assert _signature([a]) != without_grad  # grad mode is part of the key
    fw = CountingCompiler()
    compiled = aot_function(lambda x: (x + 1,), fw)
    compiled(a), compiled(b), compiled(torch.randn(4))
    assert fw.calls == 2


class _Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        return (x @ self.weight).relu()


def _guarded(module, example, compiler):
    gm = torch.fx.symbolic_trace(module)
    return aot_module(gm, [example], compiler, inputs_guarded=True)


def test_guarded_inputs_skip_the_signature_in_the_warmed_grad_mode(monkeypatch):
    """Under the caller's guards the warmed variant runs without its signature; its results
    and gradients are eager's."""
    torch.manual_seed(0)
    module, x = _Affine(), torch.randn(2, 3)
    run = _guarded(module, x, CountingCompiler())
    signatures = []
    original = run.aot_function.signature
    monkeypatch.setattr(
        run.aot_function, "signature", lambda a: signatures.append(1) or original(a)
    )
    out = run(x)
    out.sum().backward()
    got = module.weight.grad.clone()
    module.weight.grad = None
    module(x).sum().backward()
    torch.testing.assert_close(out, module(x))
    torch.testing.assert_close(got, module.weight.grad)
    assert signatures == []


def test_guarded_inputs_in_another_grad_mode_take_the_checked_path():
    torch.manual_seed(0)
    module, x = _Affine(), torch.randn(2, 3)
    compiler = CountingCompiler()
    run = _guarded(module, x, compiler)  # training variant: forward + backward
    assert compiler.calls == 2
    with torch.no_grad():
        out = run(x)
        torch.testing.assert_close(out, module(x))
    assert compiler.calls == 3 and not out.requires_grad  # an inference variant was traced


def test_a_variant_writing_an_input_keeps_its_storage_sharing_checked():
    """Writes make storage sharing between inputs matter: under guards such a variant runs
    only where the inputs share storage as the example inputs did; aliased inputs get a
    variant of their own."""

    class Accumulate(torch.nn.Module):
        def forward(self, acc, x):
            acc.add_(x)
            return x * 2  # reads the write where x shares acc's storage

    gm = torch.fx.symbolic_trace(Accumulate())
    acc, x = torch.zeros(4), torch.ones(4)
    run = aot_module(gm, [acc, x], CountingCompiler(), inputs_guarded=True)
    base = torch.ones(8)
    out = run(base[:4], base[:4])  # the same storage twice
    expected = torch.ones(8)
    expected_out = Accumulate()(expected[:4], expected[:4])
    torch.testing.assert_close(base, expected)
    torch.testing.assert_close(out, expected_out)


def test_backward_under_create_graph_is_differentiable_again():
    """A plain backward runs the compiled backward directly (grad mode is off there); under
    create_graph=True the gradients carry eager's history (double_backward.py): their own
    gradients are eager's second derivatives."""
    torch.manual_seed(0)
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(2, 3)
    compiled = aot_function(lambda x, w: (x @ w).tanh(), CountingCompiler())
    seed = torch.ones(2, 3, requires_grad=True)
    (expected,) = torch.autograd.grad((x @ w).tanh(), [w], seed, create_graph=True)
    (grad,) = torch.autograd.grad(compiled(x, w), [w], seed, create_graph=True)
    torch.testing.assert_close(grad, expected)
    assert grad.requires_grad
    second = torch.autograd.grad(grad.square().sum(), [w, seed])
    torch.testing.assert_close(second, torch.autograd.grad(expected.square().sum(), [w, seed]))
    (plain,) = torch.autograd.grad(compiled(x, w).sum(), [w])
    torch.testing.assert_close(plain, torch.autograd.grad((x @ w).tanh().sum(), [w])[0])
    assert not plain.requires_grad


@pytest.mark.parametrize("train", [False, True])
def test_written_inputs_are_copied_back_in_one_batch(monkeypatch, train):
    """A step writing many buffers (every batch norm's running statistics) writes them back
    with one multi-tensor copy, not one copy_ each; the values are eager's."""
    batches = []
    real = torch._foreach_copy_

    def counting(targets, values):
        batches.append(len(targets))
        return real(targets, values)

    monkeypatch.setattr(torch, "_foreach_copy_", counting)

    def step(x, w, *buffers):
        for k, buffer in enumerate(buffers):
            buffer.mul_(0.9).add_(x.mean() * k)
        return (x * w).sum()

    x, w = torch.randn(4), torch.randn(4, requires_grad=train)
    buffers = [torch.randn(3) for _ in range(5)]
    eager_buffers = [b.clone() for b in buffers]
    want = step(x, w, *eager_buffers)
    got = aot_function(step, CountingCompiler())(x, w, *buffers)
    assert batches == [5]
    torch.testing.assert_close(got, want)
    for b, e in zip(buffers, eager_buffers, strict=True):
        torch.testing.assert_close(b, e)


def test_written_inputs_of_several_dtypes_are_copied_back_one_batch_per_dtype(monkeypatch):
    """Running statistics (float) and batch counters (int64) go back in one multi-tensor copy
    per dtype: a list mixing dtypes would make CUDA's fused copy fall back to one each."""
    batches = []
    real = torch._foreach_copy_

    def counting(targets, values):
        batches.append({t.dtype for t in targets})
        return real(targets, values)

    monkeypatch.setattr(torch, "_foreach_copy_", counting)

    def step(x, *buffers):
        for buffer in buffers:
            buffer.add_(1 if buffer.dtype == torch.int64 else x.mean())
        return x.sum()

    x = torch.randn(4)
    buffers = [torch.randn(3), torch.zeros((), dtype=torch.int64), torch.randn(3)]
    buffers.append(torch.zeros((), dtype=torch.int64))
    eager_buffers = [b.clone() for b in buffers]
    want = step(x, *eager_buffers)
    got = aot_function(step, CountingCompiler())(x, *buffers)
    assert sorted(map(str, batches)) == ["{torch.float32}", "{torch.int64}"]
    torch.testing.assert_close(got, want)
    for b, e in zip(buffers, eager_buffers, strict=True):
        torch.testing.assert_close(b, e)


class _Step(torch.nn.Module):
    """An optimizer-like step: writes a float and an int64 input, returns a value."""

    def forward(self, p, m, count):
        m.mul_(0.9).add_(p)
        p.sub_(m * 0.1)
        count.add_(1)
        return p.sum()


def test_a_writing_variant_under_guards_skips_the_signature(monkeypatch):
    gm = torch.fx.symbolic_trace(_Step())
    p, m, count = torch.randn(5), torch.zeros(5), torch.zeros((), dtype=torch.int64)
    run = aot_module(
        gm, [p.clone(), m.clone(), count.clone()], CountingCompiler(), inputs_guarded=True
    )
    signatures = []
    original = run.aot_function.signature
    monkeypatch.setattr(
        run.aot_function, "signature", lambda a: signatures.append(1) or original(a)
    )
    eager = [p.clone(), m.clone(), count.clone()]
    for _ in range(3):
        out = run(p, m, count)
        expected = _Step()(*eager)
        torch.testing.assert_close(out, expected)
    for got, want in zip((p, m, count), eager, strict=True):
        torch.testing.assert_close(got, want)
    assert signatures == []


def test_written_inputs_of_two_dtypes_go_back_batched():
    step = _Step()
    p, m, count = torch.randn(5), torch.randn(5), torch.zeros((), dtype=torch.int64)
    eager = (p.clone(), m.clone(), count.clone())
    run = aot_function(lambda *a: step(*a), CountingCompiler())
    for _ in range(3):
        torch.testing.assert_close(run(p, m, count), step(*eager))
    for got, want in zip((p, m, count), eager, strict=True):
        torch.testing.assert_close(got, want)
    assert count.item() == 3
