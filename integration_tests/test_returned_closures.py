"""Functions made in a compiled frame over its own variables (or an inlined function's) and
returned: the frame is still one graph; the functions are made again after it, over cells
rebuilt once per call that hold the values the frame left there (tensors come out of the
graph), so sharing, later writes and self-reference behave as in eager."""

from __future__ import annotations

import pytest
import torch

import ember
import ember_frame_hook as fh


class Recording:
    def __init__(self) -> None:
        self.outputs: list[int] = []

    def __call__(self, gm, example_inputs):
        self.outputs.append(len(next(n for n in gm.graph.nodes if n.op == "output").args[0]))
        return gm.forward


def returns_reader_and_value(x):
    y = x.cos() * 3

    def read():
        return y + 1

    return read, read()


def returns_two_functions_over_one_cell(x):
    total = x.sin()

    def add(v):
        nonlocal total
        total = total + v
        return total

    def get():
        return total

    add(x)
    return add, get


def returns_a_recursive_function(x):
    scale = x.abs() + 1

    def power(n):
        return scale if n == 0 else scale * power(n - 1)

    return power, power(2)


def _helper(x):
    w = x * 2

    def inner():
        return w - 1

    return inner


def returns_a_function_made_by_a_callee(x):
    f = _helper(x)
    return f, f()


def _use(result):
    """What the test compares: every returned function is called (twice for the writers)."""
    fn, value = result
    if fn.__code__.co_name == "add":
        return [fn(torch.ones(3)), fn(torch.ones(3)), value()]
    if fn.__code__.co_name == "power":
        return [fn(3), value]
    return [fn(), value]


CASES = [
    returns_reader_and_value,
    returns_two_functions_over_one_cell,
    returns_a_recursive_function,
    returns_a_function_made_by_a_callee,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_returned_closure_matches_eager_in_one_graph(fn, backend):
    ember.reset()
    recording = Recording()
    compiled = ember.compile(fn, backend=recording if backend == "recording" else backend)
    x = torch.randn(3)
    for _ in range(2):
        expected, got = _use(fn(x)), _use(compiled(x))
        for e, g in zip(expected, got, strict=True):
            torch.testing.assert_close(g, e)
    assert len(fh.cache_entries(fn.__code__)) == 1  # the frame itself compiled, not skipped
    explained = ember.explain(fn)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    if backend == "recording":
        assert len(recording.outputs) == 1


def test_tensor_held_only_by_a_returned_closure_is_a_graph_output():
    ember.reset()
    recording = Recording()
    result = ember.compile(returns_reader_and_value, backend=recording)(torch.randn(2))
    assert recording.outputs == [2]  # the captured tensor and read()'s value
    torch.testing.assert_close(result[0](), result[1])


def test_two_calls_make_functions_over_separate_cells():
    ember.reset()
    compiled = ember.compile(returns_two_functions_over_one_cell, backend="eager")
    x = torch.randn(3)
    add1, get1 = compiled(x)
    _, get2 = compiled(x)
    add1(torch.ones(3))
    torch.testing.assert_close(get2(), x.sin() + x)
    torch.testing.assert_close(get1(), x.sin() + x + 1)
    assert add1.__closure__[0] is get1.__closure__[0]


def _counter_maker():
    """A compiled function over a free variable of its own (`hits`), returning a function
    made in the trace over that same cell, and a reader of the cell from outside."""
    hits = 0

    def step(x):
        y = x * 2

        def bump():
            nonlocal hits
            hits += 1
            return y + hits

        return bump

    return step, lambda: hits


def _library(offset):
    """An inlined function (`wrap`) whose free variable `offset` is a real cell: a function
    it makes in the trace closes over that cell too."""
    scale = [offset]

    def wrap(x):
        def shifted():
            return x + scale[0]

        return shifted

    return wrap


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_function_made_over_a_cell_from_outside_the_trace_shares_it(backend):
    ember.reset()
    eager_step, eager_hits = _counter_maker()
    step, hits = _counter_maker()
    compiled = ember.compile(step, backend=Recording() if backend == "recording" else backend)
    x = torch.randn(3)
    for _ in range(2):
        got, expected = compiled(x), eager_step(x)
        torch.testing.assert_close(got(), expected())
        torch.testing.assert_close(got(), expected())
        assert hits() == eager_hits()  # the rebuilt function wrote the maker's own cell
    assert len(fh.cache_entries(step.__code__)) == 1  # compiled, not skipped
    # Another closure of the same code: its own cell, not the first one's.
    other_step, other_hits = _counter_maker()
    compiled_other = ember.compile(other_step, backend="eager")
    compiled_other(x)()
    assert other_hits() == 1 and hits() == 4


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_function_made_by_a_callee_over_its_real_cell(backend):
    ember.reset()
    wrap = _library(5.0)

    def fn(x):
        return wrap(x.cos())

    recording = Recording()
    compiled = ember.compile(fn, backend=recording if backend == "recording" else backend)
    x = torch.randn(3)
    made = compiled(x)
    torch.testing.assert_close(made(), fn(x)())
    cells = dict(zip(made.__code__.co_freevars, made.__closure__, strict=True))
    assert cells["scale"] is wrap.__closure__[0]  # the cell itself, not a copy
    wrap.__closure__[0].cell_contents[0] = 7.0  # written later: seen, as in eager
    torch.testing.assert_close(made(), x.cos() + 7.0)
    explained = ember.explain(fn)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
