"""`MyFunction.apply` is recognised by what it is on every supported torch: a bound Python
classmethod up to 2.13, a builtin method bound to the class from 2.14 (no `__func__`; the
tracer failed to import there and Ember compiled nothing)."""

from __future__ import annotations

import dataclasses
import enum

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import allow_in_graph, graph_break
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.autograd_function import autograd_function_of


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

    @classmethod
    def other(cls, x):
        return x


class OwnApply(Double):
    @classmethod
    def apply(cls, x):  # a subclass's own apply is not Function's
        return x


def test_bound_apply_is_recognised_and_nothing_else():
    assert autograd_function_of(Double.apply) is Double
    assert autograd_function_of(Double.other) is None  # another classmethod bound to it
    assert autograd_function_of(Double.forward) is None
    assert autograd_function_of(OwnApply.apply) is None
    assert autograd_function_of(len) is None


def test_apply_is_traced_into_one_graph():
    compiled = Compiled(lambda x: Double.apply(x).sin(), fullgraph=True)
    x = torch.randn(4, requires_grad=True)
    out = compiled(x)
    assert same(out, Double.apply(x).sin())
    assert compiled.backend.graph_count == 1


class ScaleBySaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # not the forward's derivative: the custom rule must be kept


def test_apply_through_an_instance_made_in_the_trace():
    # `Fn().apply(x)`: deprecated in eager (a warning) yet common in older code
    def fn(x):
        return ScaleBySaved().apply(x).cos()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        out = compiled(x)
    with pytest.warns(DeprecationWarning):
        expected = fn(x_ref)
    assert same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert same(x.grad, x_ref.grad)
    assert compiled.backend.graph_count == 1


class RecordInto(torch.autograd.Function):
    """forward writes into a list it is given: a new tensor, the input itself, a number."""

    @staticmethod
    def forward(ctx, x, sink):
        sink.append(x.exp())
        sink.append(x)
        sink.append(len(sink))
        return x * 2

    @staticmethod
    def backward(ctx, grad, *_):
        return grad * 2, None


def test_list_written_by_forward_is_seen_after_the_call():
    # the list is made in the frame: what forward put in it is read back in the trace
    def fn(x):
        sink = [x.cos()]
        out = RecordInto.apply(x, sink)
        return out + sink[1] * len(sink), sink[2] is x, sink[3]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4, requires_grad=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_callers_list_written_by_forward_is_replayed():
    # the list comes from the caller: forward's writes reach it after the compiled call
    def fn(x, sink):
        return RecordInto.apply(x + 1, sink)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got_sink, want_sink = [], []
    assert same(compiled(x, got_sink), fn(x, want_sink))
    assert same(got_sink, want_sink)
    assert compiled.backend.graph_count == 1


def test_list_forward_leaves_alone_passes_its_tensors():
    class WeightedSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weights):
            return x * weights[0] + weights[1]

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    def fn(x, w0, w1):
        return WeightedSum.apply(x, [w0, w1]).sum()

    compiled = Compiled(fn, fullgraph=True)
    args = [torch.randn(3, requires_grad=True) for _ in range(3)]
    assert same(compiled(*args), fn(*args))
    assert compiled.backend.graph_count == 1


def test_dict_argument_is_a_break_run_eagerly():
    class ReadTable(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, table):
            table["seen"] = True
            return x + 1

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    def fn(x, table):
        return ReadTable.apply(x, table) * 2

    compiled = Compiled(fn)
    table = {}
    x = torch.randn(3)
    assert same(compiled(x, table), fn(x, {}))
    assert table == {"seen": True}


class ExpInPlace(torch.autograd.Function):
    """Writes exp into its input through `out=` (allowed only because forward runs without
    grad) and marks it dirty."""

    @staticmethod
    def forward(ctx, x):
        torch.exp(x, out=x)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * result


@pytest.mark.parametrize("keep_output", [True, False])
def test_forward_writing_its_input_stays_in_the_graph(keep_output):
    def fn(w):
        h = w * 0.5
        out = ExpInPlace.apply(h)
        return (out if keep_output else h) * w  # a dropped output: the write still counts

    compiled = Compiled(fn, fullgraph=True)
    results = []
    for run in (fn, compiled):
        w = torch.tensor([0.3, -1.2, 2.0], requires_grad=True)
        out = run(w)
        out.sum().backward()
        results.append((out.detach(), w.grad))
    assert same(results[1], results[0])
    assert compiled.backend.graph_count == 1


def test_forward_writing_a_callers_tensor_writes_it():
    def fn(x, buffer):
        ExpInPlace.apply(buffer)
        return x + 1

    compiled = Compiled(fn, fullgraph=True)
    x, got, want = torch.randn(3), torch.zeros(3), torch.zeros(3)
    assert same(compiled(x, got), fn(x, want))
    assert same(got, want)
    assert compiled.backend.graph_count == 1


SEEN_SHAPES = []


class NotesShapes(torch.autograd.Function):
    """forward records into a module-level list: a Python effect of every eager call."""

    @staticmethod
    def forward(ctx, x):
        SEEN_SHAPES.append(tuple(x.shape))
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad


def _counting_function():
    calls = {"forward": 0}

    class CountsCalls(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls["forward"] += 1  # a dict in a closure cell
            print("forward ran")
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    return CountsCalls, calls


def test_forward_with_python_effects_runs_eagerly_once_per_call(capsys):
    # run on example values at trace time, forward would append/count/print once more,
    # with fake tensors: the call is a break, and eager makes each effect once
    counting, calls = _counting_function()

    def fn(x):
        return NotesShapes.apply(x).sin() + counting.apply(x)

    compiled = Compiled(fn)
    SEEN_SHAPES.clear()
    x = torch.randn(2, 3)
    for _ in range(2):
        assert same(compiled(x), NotesShapes.apply(x).sin() + counting.apply(x))
    assert SEEN_SHAPES == [(2, 3)] * 4
    assert calls["forward"] == 4
    assert capsys.readouterr().out == "forward ran\n" * 4
    assert any("changes Python state" in str(b) for b in compiled.breaks)


@dataclasses.dataclass
class Affine:
    scale: torch.Tensor
    shift: torch.Tensor
    repeats: int


class ApplyAffine(torch.autograd.Function):
    """Takes a dataclass of tensors and a number: neither is an autograd input in eager
    (no gradient reaches `params.scale`), the custom backward decides the rest."""

    @staticmethod
    def forward(ctx, x, params, offset):
        ctx.save_for_backward(params.scale)
        return (x * params.scale + params.shift) * params.repeats + offset

    @staticmethod
    def backward(ctx, grad):
        (scale,) = ctx.saved_tensors
        return grad * scale, None, None


def _affine_grads(run, params_requires_grad=True):
    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    params = Affine(
        torch.tensor([2.0, 3.0, -1.0], requires_grad=params_requires_grad), torch.ones(3), 2
    )
    out = run(x, params)
    out.sum().backward()
    return out.detach(), x.grad, params.scale.grad


def test_dataclass_argument_is_passed_as_its_fields():
    def fn(x, params):
        return ApplyAffine.apply(x, params, 0.5).exp()

    compiled = Compiled(fn, fullgraph=True)
    assert same(_affine_grads(compiled), _affine_grads(fn))
    assert _affine_grads(compiled)[2] is None
    assert compiled.backend.graph_count == 1
    # another object with other values: the fields are graph inputs, read on each call
    x = torch.randn(3)
    other = Affine(torch.full((3,), 5.0), torch.zeros(3), 2)
    assert same(compiled(x, other), fn(x, other))
    # another number of repeats: guarded, retraced
    other.repeats = 3
    assert same(compiled(x, other), fn(x, other))


def test_dataclass_built_in_the_frame_is_passed_too():
    def fn(x, scale):
        return ApplyAffine.apply(x, Affine(scale, scale.cos(), 1), 1.0)

    compiled = Compiled(fn, fullgraph=True)
    x, scale = torch.randn(4), torch.randn(4)
    assert same(compiled(x, scale), fn(x, scale))
    assert compiled.backend.graph_count == 1


def test_forward_rebinding_a_field_is_a_break():
    class Rebinds(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, params):
            params.repeats += 1
            return x * params.repeats

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    def fn(x, params):
        return Rebinds.apply(x, params)

    compiled = Compiled(fn)
    x = torch.randn(3)
    got, want = Affine(x, x, 1), Affine(x, x, 1)
    assert same(compiled(x, got), fn(x, want))
    assert got.repeats == want.repeats == 2
    assert any("sets attributes of a dataclass" in str(b) for b in compiled.breaks)


def test_failed_trace_into_a_func_transform_leaves_no_level_pushed():
    # tracing into torch.func.grad entered its level stack at trace time; the break
    # that followed left the level pushed, and eager code after it failed
    def fn(x):
        return torch.func.grad(lambda y: (y.sin() * 2).sum())(x)

    x = torch.randn(3)
    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(x)
    assert torch._C._functorch.maybe_current_level() is None
    torch.randn(2).requires_grad_(True)  # raised "inside of a function being transformed"
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert torch._C._functorch.maybe_current_level() is None


@dataclasses.dataclass
class Parts:
    total: torch.Tensor
    count: int


class SplitStats(torch.autograd.Function):
    """Returns a tensor, a dataclass and a dict: apply leaves the last two as forward made
    them (their tensors get no gradient history), the tensor gets the custom backward."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, Parts(x.sum(), x.numel()), {"max": x.amax(), "n": 3}

    @staticmethod
    def backward(ctx, grad, *_):
        return grad * 5


def test_dataclass_and_dict_in_forwards_result():
    def fn(x):
        out, parts, extra = SplitStats.apply(x)
        return out * parts.count + parts.total + extra["max"] * extra["n"], parts, extra

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    got, want = compiled(x), fn(x_ref)
    assert same(got[0], want[0])
    assert type(got[1]) is Parts and same(got[1].total, want[1].total)
    assert got[1].count == want[1].count and not got[1].total.requires_grad
    assert same(got[2], want[2])
    got[0].sum().backward()
    want[0].sum().backward()
    assert same(x.grad, x_ref.grad)
    assert compiled.backend.graph_count == 1


class ScaleByModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, x):
        return x * module.factor

    @staticmethod
    def backward(ctx, grad):
        return None, grad


class Holder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.factor = 2


def test_module_argument_is_a_break_run_eagerly():
    # forward reads the module when it runs: a graph holding the module as a constant
    # failed to run (its class is no name in the graph's code), and a backend tracing the
    # call would bake the attribute in unguarded
    holder = Holder()

    def fn(x):
        return ScaleByModule.apply(holder, x) + 1

    compiled = Compiled(fn)
    x = torch.ones(2)
    assert same(compiled(x), fn(x))
    holder.factor = 5
    assert same(compiled(x), fn(x))
    assert any("as an autograd.Function argument" in str(b) for b in compiled.breaks)


class Mode(enum.Enum):
    DOUBLE = 2
    TRIPLE = 3


class ScaleByMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mode, shape):
        return (x * mode.value).reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(-1) * 7, None, None


def test_literal_arguments_pass_as_they_are():
    def fn(x, mode):
        return ScaleByMode.apply(x, mode, torch.Size([2, 2]))

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    for mode in (Mode.DOUBLE, Mode.TRIPLE):
        assert same(compiled(x, mode), fn(x, mode))


BACKWARD_CALLS = []


class CountsBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        BACKWARD_CALLS.append(grad.shape)  # once per backward pass in eager
        return grad * 2, None


def test_backward_with_python_effects_is_a_break():
    # a backend that retraces the graph with autograd runs the user's backward once, when
    # it compiles: the call runs eagerly, its backward on every pass
    def fn(x):
        return CountsBackward.apply(x, 3).sum()

    compiled = Compiled(fn)
    BACKWARD_CALLS.clear()
    for _ in range(3):
        compiled(torch.randn(2, requires_grad=True)).backward()
    assert len(BACKWARD_CALLS) == 3
    assert any("backward changes Python state" in str(b) for b in compiled.breaks)
    # no grad needed: nothing runs the backward, the call is traced
    BACKWARD_CALLS.clear()
    assert same(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert BACKWARD_CALLS == []


def test_duplicate_tensor_input_accumulates_both_gradients():
    class Product(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b + a

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * (b + 1), grad * a

    def fn(x):
        return Product.apply(x, x).sum()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.tensor([0.5, -2.0, 3.0], requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    compiled(x).backward()
    fn(x_ref).backward()
    assert same(x.grad, x_ref.grad)


class _Switch:
    def __init__(self) -> None:
        self.flips = 0


SWITCH = _Switch()


def _flip():  # a helper the backward calls: its write is found through it
    SWITCH.flips += 1


class FlipsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 4

    @staticmethod
    def backward(ctx, grad):
        _flip()
        return grad * 4


def test_effect_made_by_a_helper_of_backward_is_found():
    def fn(x):
        return FlipsInBackward.apply(x).sum()

    compiled = Compiled(fn)
    SWITCH.flips = 0
    for _ in range(2):
        compiled(torch.randn(3, requires_grad=True)).backward()
    assert SWITCH.flips == 2
    assert any("backward changes Python state" in str(b) for b in compiled.breaks)


class _HalvesWithBreak(torch.autograd.Function):
    """forward asks for a graph break between its two halves."""

    @staticmethod
    def forward(ctx, x):
        first = x.cos() * 2
        graph_break()
        ctx.save_for_backward(first)
        return first + x

    @staticmethod
    def backward(ctx, grad):
        (first,) = ctx.saved_tensors
        return grad * first


def test_graph_break_asked_for_in_forward_breaks_at_apply_and_forward_compiles_alone():
    # the user's break is honoured: apply runs eagerly, and its forward's frame is
    # compiled on its own, in two graphs around the break
    def fn(x):
        return _HalvesWithBreak.apply(x)

    for requires_grad in (True, False):
        compiled = Compiled(fn)
        x = torch.randn(5, requires_grad=requires_grad)
        for _ in range(2):
            out = compiled(x)
            assert same(out, fn(x))
        assert any("forward asks for a graph break" in str(b) for b in compiled.breaks)
        assert compiled.backend.graph_count == 2  # forward's two halves, no graph for fn
        if requires_grad:
            (grad,) = torch.autograd.grad(out.sum(), x)
            assert same(grad, x.cos() * 2)
    with pytest.raises(Unsupported, match="forward asks for a graph break"):
        Compiled(fn, fullgraph=True)(torch.randn(3, requires_grad=True))


KEPT_BY_FORWARD: list = []


def _keeping_function():
    noted = []  # a closure cell of forward

    class KeepsIntermediates(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            inner = x.exp()
            ctx.save_for_backward(x)
            noted.append(inner)
            total = torch.zeros((), dtype=x.dtype)
            total += (inner * x).sum()  # an in-place result as forward's output
            KEPT_BY_FORWARD.append(total)
            KEPT_BY_FORWARD.append(x.shape[0])
            return total

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.sign() * 5  # a rule of its own

    return KeepsIntermediates, noted


def test_forward_appending_to_lists_it_names_is_replayed_after_the_graph():
    # what forward appends (an intermediate, its own output, a number) reaches the lists
    # as eager puts it there, once per call, and the custom gradient flows
    keeping, noted = _keeping_function()

    def fn(x):
        out = keeping.apply(x)
        return out * 2 + noted[-1].sum()

    compiled = Compiled(fn, fullgraph=True)
    for _ in range(2):
        x = torch.randn(4, requires_grad=True)
        noted.clear()
        KEPT_BY_FORWARD.clear()
        expected = fn(x)
        (expected_grad,) = torch.autograd.grad(expected, x)
        eager_lists = (list(noted), list(KEPT_BY_FORWARD))
        noted.clear()
        KEPT_BY_FORWARD.clear()
        out = compiled(x)
        assert same(out, expected)
        assert same(torch.autograd.grad(out, x)[0], expected_grad)
        assert same((list(noted), list(KEPT_BY_FORWARD)), eager_lists)
        assert KEPT_BY_FORWARD[0] is not None and KEPT_BY_FORWARD[1] == 4
        assert not noted[0].requires_grad  # made under forward's no_grad, as in eager
    assert not compiled.breaks


def test_forward_appending_and_changing_more_is_still_a_break():
    state = {"calls": 0}
    kept = []

    class AppendsAndCounts(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            kept.append(x.sin())
            state["calls"] += 1
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    compiled = Compiled(lambda x: AppendsAndCounts.apply(x) + 1)
    x = torch.randn(3)
    assert same(compiled(x), x * 2 + 1)
    assert len(kept) == 1 and state["calls"] == 1
    assert any("changes Python state" in str(b) for b in compiled.breaks)


@allow_in_graph
class _KeptWhole(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        graph_break()  # not honoured: the class is put in the graph as it is
        return x * 4

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


def test_break_directive_in_forward_of_a_class_allowed_in_graph_is_not_honoured():
    compiled = Compiled(lambda x: _KeptWhole.apply(x) + 1, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    out = compiled(x)
    assert same(out, x * 4 + 1)
    assert same(torch.autograd.grad(out.sum(), x)[0], torch.full((3,), 4.0))
    assert compiled.backend.graph_count == 1
