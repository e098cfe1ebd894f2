"""with-blocks over the user's own context managers (classes with Python __enter__/__exit__,
@contextmanager generators whose yield sits in try/finally) and context managers used as
decorators (torch.no_grad(), set_grad_enabled(m), disable_saved_tensors_hooks), all in one
graph under fullgraph=True (variables/user_contexts.py, contexts.py, generator_context.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import Compiled, same


class GradSwitch:
    """Sets grad mode on entry and puts the old mode back on exit, by hand."""

    def __init__(self, mode):
        self.saved = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, kind, value, tb):
        torch._C._set_grad_enabled(self.saved)


class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return 3

    def __exit__(self, kind, value, tb):
        self.log.append("exit")
        return False


@contextlib.contextmanager
def grad_switch(mode):
    saved = torch.is_grad_enabled()
    try:
        yield torch._C._set_grad_enabled(mode)
    finally:
        torch._C._set_grad_enabled(saved)


@pytest.mark.parametrize("switch", [GradSwitch, grad_switch], ids=["class", "generator"])
@pytest.mark.parametrize("outer", [True, False], ids=["grad", "no_grad"])
def test_grad_switching_context_of_the_users(switch, outer):
    def fn(x):
        with switch(True):
            y = x * 2 if torch.is_grad_enabled() else x
            with switch(False):
                z = y.cos() if not torch.is_grad_enabled() else y
            w = z + y
        return w - 1

    x = torch.randn(2, 3, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    with torch.set_grad_enabled(outer):
        expected = fn(x)
        got = compiled(x)
        assert torch.is_grad_enabled() == outer
    assert same(got, expected)
    assert got.requires_grad == expected.requires_grad
    assert compiled.backend.graph_count == 1


def test_an_argument_context_object_enters_and_exits_once():
    def fn(x, rec):
        with rec as k:
            y = x * k
        return y + 1

    x = torch.randn(4)
    eager_rec, compiled_rec = Recorder(), Recorder()
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x, compiled_rec), fn(x, eager_rec))
    assert compiled_rec.log == eager_rec.log == ["enter", "exit"]
    assert compiled.backend.graph_count == 1


def test_a_context_object_made_inside_is_returned_with_its_state():
    def fn(x):
        switch = GradSwitch(False)
        with switch:
            y = x + 1
        return y, switch

    x = torch.randn(3, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    y, switch = compiled(x)
    assert same(y, fn(x)[0]) and not y.requires_grad
    assert switch.mode is False and switch.saved is True
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize("called", [True, False], ids=["instance", "class"])
@pytest.mark.parametrize("wrapper", [torch.no_grad, torch.enable_grad])
def test_grad_mode_decorator_on_an_inner_function(wrapper, called):
    other = torch.enable_grad if wrapper is torch.no_grad else torch.no_grad

    def fn(x):
        def inner(x):
            return x.sin() * 2

        with other():
            inner = wrapper()(inner) if called else wrapper(inner)
            mode_inside = torch.is_grad_enabled()  # decorating changes no mode
        with other():
            return inner(x), mode_inside

    x = torch.randn(5, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    (got, got_mode), (expected, mode) = compiled(x), fn(x)
    assert same(got, expected) and got_mode == mode
    assert got.requires_grad == expected.requires_grad
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_as_decorator_switches_back_after_decorating(mode):
    def fn(x):
        with torch.set_grad_enabled(not mode):

            @torch.set_grad_enabled(mode)
            def inner(x):
                return x.exp()

            mode_inside = torch.is_grad_enabled()
        return inner(x), mode_inside

    x = torch.randn(5, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    (got, got_mode), (expected, mode_seen) = compiled(x), fn(x)
    assert same(got, expected) and got_mode == mode_seen == (not mode)
    assert got.requires_grad == expected.requires_grad == mode
    assert compiled.backend.graph_count == 1


def test_disable_saved_tensors_hooks_as_decorator():
    def fn(x):
        @torch.autograd.graph.disable_saved_tensors_hooks("no saved-tensor hooks here")
        def inner(a, b):
            return a * b

        return inner(x, x + 1)

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is None
    assert compiled.backend.graph_count == 1
    # the switches stay in the graph, where the block is entered and left
    assert compiled.backend.ops() == [
        "add",
        "_saved_tensors_hooks_disable",
        "mul",
        "_saved_tensors_hooks_enable",
    ]


@pytest.mark.parametrize("outer", [True, False], ids=["grad", "no_grad"])
def test_a_grad_mode_block_that_changes_nothing_adds_no_switch(outer):
    def fn(x):
        y = x + 1
        with torch.no_grad():
            y = y * 2
        return y - 1

    x = torch.randn(3, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    with torch.set_grad_enabled(outer):
        expected, got = fn(x), compiled(x)
    assert same(got, expected) and got.requires_grad == expected.requires_grad
    switches = compiled.backend.ops().count("_set_grad_enabled")
    assert switches == (2 if outer else 0)
