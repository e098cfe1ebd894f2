"""User `torch.autograd.Function`s under the default backend (issue 26): values and custom
gradients as eager gives them, one graph, run compiled."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _ran_compiled() -> None:
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])


def _values_and_grads(fn, *inputs, compile_it: bool):
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    run = ember.compile(fn, fullgraph=True) if compile_it else fn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = run(*leaves)
    out.sum().backward()
    return out.detach(), [t.grad for t in leaves]


class _CubeWithOddGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign()  # a rule of its own, not the forward's derivative


def test_apply_of_an_instance_under_inductor():
    def fn(x):
        return _CubeWithOddGrad().apply(x * 2) + 1

    x = torch.randn(6, requires_grad=True)
    expected = _values_and_grads(fn, x, compile_it=False)
    got = _values_and_grads(fn, x, compile_it=True)
    torch.testing.assert_close(got, expected)
    _ran_compiled()


class _KeepIntermediate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kept):
        kept.append(x.tanh())
        return x * 3

    @staticmethod
    def backward(ctx, grad, *_):
        return grad * 3, None


def test_list_filled_by_forward_under_inductor():
    def fn(x):
        kept = []
        out = _KeepIntermediate.apply(x, kept)
        return out * kept[0] + len(kept)

    x = torch.randn(5, requires_grad=True)
    expected = _values_and_grads(fn, x, compile_it=False)
    got = _values_and_grads(fn, x, compile_it=True)
    torch.testing.assert_close(got, expected)
    _ran_compiled()


class _ExpInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        torch.exp(x, out=x)  # forward runs without grad: out= on a tensor needing grad is fine
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * result


@pytest.mark.parametrize("keep_output", [True, False])
def test_forward_writing_its_input_under_inductor(keep_output):
    def fn(w):
        h = w.sin()
        out = _ExpInPlace.apply(h)
        return (out if keep_output else h) * w

    w = torch.randn(6, requires_grad=True)
    expected = _values_and_grads(fn, w, compile_it=False)
    got = _values_and_grads(fn, w, compile_it=True)
    torch.testing.assert_close(got, expected)
    _ran_compiled()


@dataclasses.dataclass
class _Gains:
    gain: torch.Tensor
    power: int


class _ApplyGains(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gains, tensors):
        ctx.save_for_backward(gains.gain, tensors[0])
        return x**gains.power * gains.gain + tensors[0] * tensors[1]

    @staticmethod
    def backward(ctx, grad):
        gain, first = ctx.saved_tensors
        return grad * gain + first * 0, None, None


def test_dataclass_and_list_arguments_under_inductor():
    def fn(x, gains, a, b):
        return _ApplyGains.apply(x, gains, [a, b]).tanh()

    gains = _Gains(torch.randn(4, requires_grad=True), 3)
    inputs = (torch.randn(4, requires_grad=True), torch.randn(4), torch.randn(4))
    expected = _values_and_grads(lambda x, a, b: fn(x, gains, a, b), *inputs, compile_it=False)
    got = _values_and_grads(lambda x, a, b: fn(x, gains, a, b), *inputs, compile_it=True)
    torch.testing.assert_close(got, expected)
    assert gains.gain.grad is None
    _ran_compiled()


class _WithSummary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sin(), _Gains(x.abs().sum(), 2), {"peak": x.amax()}

    @staticmethod
    def backward(ctx, grad, *_):
        return grad * 4


def test_dataclass_and_dict_results_under_inductor():
    def fn(x):
        out, summary, extra = _WithSummary.apply(x)
        return out * summary.power + summary.gain + extra["peak"]

    x = torch.randn(5, requires_grad=True)
    expected = _values_and_grads(fn, x, compile_it=False)
    got = _values_and_grads(fn, x, compile_it=True)
    torch.testing.assert_close(got, expected)
    _ran_compiled()


_BACKWARD_RUNS = []


class _LogsBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.cos()

    @staticmethod
    def backward(ctx, grad):
        _BACKWARD_RUNS.append(1)
        return grad * 2


def test_backward_effects_happen_on_every_pass_under_inductor():
    # inductor's autograd retrace ran the user's backward once, at compile time
    compiled = ember.compile(lambda x: _LogsBackward.apply(x).sum() * 2)
    _BACKWARD_RUNS.clear()
    for _ in range(3):
        compiled(torch.randn(4, requires_grad=True)).backward()
    assert len(_BACKWARD_RUNS) == 3


_GAIN = {"value": 2.0}


class _ByGain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * _GAIN["value"]

    @staticmethod
    def backward(ctx, grad):
        return grad * _GAIN["value"] * 10  # a rule of its own


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_value_read_by_forward_and_backward_is_guarded(backend):
    # a backend that retraces with autograd kept the value forward and backward read
    # first (a wrong result after the change), until such reads were guarded
    def fn(x):
        return _ByGain.apply(x) + 1

    def values_and_grad(run, x):
        x = x.detach().clone().requires_grad_(True)
        out = run(x)
        out.sum().backward()
        return out.detach(), x.grad

    compiled = ember.compile(fn, fullgraph=True, backend=backend)
    x = torch.randn(6)
    try:
        torch.testing.assert_close(values_and_grad(compiled, x), values_and_grad(fn, x))
        torch.testing.assert_close(values_and_grad(compiled, x), values_and_grad(fn, x))
        assert ember.counters[backend]["forward_graphs"] == 1
        _GAIN["value"] = 3.0
        torch.testing.assert_close(values_and_grad(compiled, x), values_and_grad(fn, x))
        assert ember.counters[backend]["forward_graphs"] == 2  # retraced, once
    finally:
        _GAIN["value"] = 2.0
    if backend == "inductor":
        _ran_compiled()


class _FlipGrad(torch.autograd.Function):
    """A gradient reversal: forward returns its input as a view of itself."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -2 * grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_function_returning_its_input_keeps_its_backward(backend):
    # the output, a view of the input, was rebuilt from the real input outside the
    # compiled graph: its gradient was the view's own (1), not the user's (-2)
    def fn(x, y):
        return _FlipGrad.apply(x), _FlipGrad.apply(y).t(), y.sin()

    def values_and_grads(run, x, y):
        x, y = (t.detach().clone().requires_grad_(True) for t in (x, y))
        outs = run(x, y)
        assert outs[0].data_ptr() == x.data_ptr()  # still the input's storage, as in eager
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
        return [o.detach() for o in outs], [o.requires_grad for o in outs], x.grad, y.grad

    x, y = torch.randn(5), torch.randn(3, 4)
    expected = values_and_grads(fn, x, y)
    got = values_and_grads(ember.compile(fn, fullgraph=True, backend=backend), x, y)
    torch.testing.assert_close(got, expected)
    assert ember.counters[backend]["forward_graphs"] == 1
    if backend == "inductor":
        _ran_compiled()


def _defines_its_function(x):
    class Local(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * _GAIN["value"]

        @staticmethod
        def backward(ctx, grad):
            return grad * _GAIN["value"] * 10

    return Local.apply(x) + 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_value_read_by_a_function_defined_in_the_frame_is_guarded(backend):
    def values_and_grad(run, x):
        x = x.detach().clone().requires_grad_(True)
        out = run(x)
        out.sum().backward()
        return out.detach(), x.grad

    compiled = ember.compile(_defines_its_function, fullgraph=True, backend=backend)
    x = torch.randn(6)
    try:
        expected = values_and_grad(_defines_its_function, x)
        torch.testing.assert_close(values_and_grad(compiled, x), expected)
        _GAIN["value"] = 3.0
        expected = values_and_grad(_defines_its_function, x)
        torch.testing.assert_close(values_and_grad(compiled, x), expected)
        assert ember.counters[backend]["forward_graphs"] == 2  # retraced, once
    finally:
        _GAIN["value"] = 2.0
    if backend == "inductor":
        _ran_compiled()


class _BreakInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.sin() + 1
        ember.graph_break()
        ctx.save_for_backward(y)
        return y * x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * 2  # a rule of its own


def test_graph_break_in_forward_under_inductor():
    # apply runs eagerly at the break; its forward is compiled alone, in two graphs
    def fn(x):
        return _BreakInForward.apply(x) * 3

    x = torch.randn(7, requires_grad=True)
    run = ember.compile(fn)
    leaves = [x.detach().clone().requires_grad_(True) for _ in range(2)]
    expected, got = fn(leaves[0]), run(leaves[1])
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(leaves[1].grad, leaves[0].grad)
    _ran_compiled()


_STASH: list = []


class _StashesIntermediate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        _STASH.append(x.cos())  # a global list forward names
        _STASH.append(2)
        out = torch.zeros_like(x)
        out += x * x
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * 3  # a rule of its own


def test_forward_appends_to_a_global_list_under_inductor():
    def fn(x):
        y = _StashesIntermediate.apply(x)
        return y + _STASH[-2] * _STASH[-1]

    x = torch.randn(6, requires_grad=True)
    _STASH.clear()
    expected = _values_and_grads(fn, x, compile_it=False)
    eager_stash = list(_STASH)
    _STASH.clear()
    got = _values_and_grads(fn, x, compile_it=True)
    torch.testing.assert_close(got, expected)
    assert len(_STASH) == 2 and _STASH[1] == 2
    torch.testing.assert_close(_STASH[0], eager_stash[0])
    _ran_compiled()
