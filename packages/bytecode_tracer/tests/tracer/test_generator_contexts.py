"""with-blocks over @contextlib.contextmanager functions (variables/generator_context.py) and
over dispatch-disabling guards (variables/contexts.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import Compiled, same, skip_reasons
from ember_bytecode_tracer.exc import Unsupported

events: list[str] = []


@contextlib.contextmanager
def scaled(factor):
    events.append("enter")
    yield factor * 2
    events.append("exit")


@contextlib.contextmanager
def no_grad_region():
    with torch.no_grad():
        yield


@contextlib.contextmanager
def logged_finally():
    try:
        yield
    finally:
        events.append("finally")


@contextlib.contextmanager
def never_yields():
    if False:
        yield


def test_body_up_to_yield_on_enter_rest_on_exit():
    def fn(x):
        with scaled(3) as k:
            y = x * k
        return y + 1

    x = torch.randn(4)
    events.clear()
    expected = fn(x)
    assert events == ["enter", "exit"]
    compiled = Compiled(fn, fullgraph=True)
    events.clear()
    got = compiled(x)
    assert same(got, expected)
    assert events == ["enter", "exit"]  # list appends are replayed side effects
    assert compiled.backend.graph_count == 1
    assert compiled.backend.ops() == ["mul", "add"]
    events.clear()
    assert same(compiled(x), expected) and events == ["enter", "exit"]  # cached code too


def test_yielded_value_is_guarded_through_the_argument():
    factor = {"k": 3}

    def fn(x):
        with scaled(factor["k"]) as k:
            return x * k

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    assert same(compiled(x), x * 6)
    factor["k"] = 5
    assert same(compiled(x), x * 10)
    assert compiled.backend.graph_count == 2


def test_grad_mode_switched_inside_the_generator():
    w = torch.randn(3, requires_grad=True)

    def fn(a, w):
        with no_grad_region():
            frozen = a * w
        return frozen.requires_grad, frozen + a * w

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    flag, got = compiled(x, w)
    assert flag is False and got.requires_grad and same(got, fn(x, w)[1])
    assert torch.is_grad_enabled()
    assert compiled.backend.graph_count == 1


def test_context_manager_defined_in_the_frame():
    def fn(x):
        @contextlib.contextmanager
        def shifted(v):
            yield v + 1

        with shifted(x) as y:
            return y * 2

    x = torch.randn(3)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))


def test_ops_in_body_with_a_finally_that_has_effects_are_traced():
    # A plain finally re-raises: the code after the yield is traced on exit, its effect
    # (a list append, a global write reading a value set before the block) replayed.
    def fn(x):
        global _seen
        _seen = 7
        with logged_finally():
            y = x.sin()
        return y * _seen

    events.clear()
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), x.sin() * 7) and events == ["finally"]
    assert compiled.backend.graph_count == 1


@contextlib.contextmanager
def copies_on_exit(box):
    try:
        yield box[0] * 2
    finally:
        box[1] = box[0] + 1


def test_finally_after_yield_reads_state_set_inside_the_block():
    def fn(x, box):
        with copies_on_exit(box) as y:
            box[0] = 10
            out = x.cos() + y
        return out, box[1]

    box = [1, 0]
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    out, after = compiled(x, box)
    assert same(out, x.cos() + 2) and after == 11 and box == [10, 11]


@contextlib.contextmanager
def swallowing():
    try:
        yield
    except RuntimeError:
        events.append("swallowed")


def test_ops_in_body_of_a_try_except_around_the_yield_break():
    # The except may catch an error the graph raises at run time: never traced.
    def fn(x):
        with swallowing():
            y = x.sin()
        return y

    with pytest.raises(Unsupported, match="try/except"):
        Compiled(fn, fullgraph=True)(torch.randn(3))
    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), x.sin())


def test_finally_with_effects_but_no_ops_in_body_is_traced():
    def fn(x):
        y = x.cos()
        with logged_finally():
            pass
        return y

    events.clear()
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), x.cos()) and events == ["finally"]
    assert compiled.backend.graph_count == 1


def test_generator_that_does_not_yield_is_a_clean_error():
    def fn(x):
        with never_yields():
            return x + 1

    with pytest.raises(Unsupported, match="didn't yield"):
        Compiled(fn, fullgraph=True)(torch.randn(3))
    with pytest.raises(RuntimeError, match="didn't yield"):
        Compiled(fn)(torch.randn(3))  # without fullgraph: eager's own error


def test_exception_leaving_the_block_is_a_graph_break():
    def fn(x):
        try:
            with scaled(1):
                raise KeyError("k")
        except KeyError:
            pass
        return x + 1

    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(torch.randn(3))
    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), x + 1)


def test_no_graph_ops_inside_dispatch_disabling_guards():
    def reads_under_guard(x):
        with torch.utils._mode_utils.no_dispatch(), torch._C._DisableFuncTorch():
            flag = torch.is_grad_enabled()
        return x + 1, flag

    compiled = Compiled(reads_under_guard, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), (x + 1, True))
    assert compiled.backend.graph_count == 1

    def op_under_guard(x):
        with torch.utils._mode_utils.no_dispatch():
            return x + 1

    with pytest.raises(Unsupported, match="_DisableTorchDispatch"):
        Compiled(op_under_guard, fullgraph=True)(x)
    compiled = Compiled(op_under_guard)
    assert same(compiled(x), x + 1)
    assert skip_reasons(compiled) or compiled.breaks


@contextlib.contextmanager
def default_dtype(dtype):
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        yield
    finally:
        torch.set_default_dtype(before)


def test_default_dtype_set_inside_a_context_is_one_graph():
    # The setter is a kept graph op, switched at trace time too (state_switches.py): the
    # factory in the block builds the block's dtype, and the default is back after it.
    def fn(x):
        with default_dtype(torch.float64):
            made = torch.tensor([1.0, 2.0])
        return x + 1, made

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(2)
    out, made = compiled(x)
    assert same(out, x + 1) and made.dtype == torch.float64
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    assert torch.get_default_dtype() == torch.float32
