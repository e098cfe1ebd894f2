"""contextvars.ContextVar read and set for a while in traced code (variables/context_vars.py):
torch 2.14+'s `sdpa_kernel` sets one around its block. One graph; the entry value guarded;
a graph that would end with a variable set is refused, and eager's effect is kept."""

from __future__ import annotations

import contextlib
import contextvars

import pytest
import torch

from conftest import Compiled, same

uses_priority = contextvars.ContextVar("uses_priority", default=False)
scale = contextvars.ContextVar("scale", default=1.0)
no_default = contextvars.ContextVar("no_default")


@contextlib.contextmanager
def prioritized(flag: bool):
    # the shape of torch.nn.attention.sdpa_kernel on torch 2.14+
    token = uses_priority.set(flag or uses_priority.get())
    try:
        yield
    finally:
        uses_priority.reset(token)


def block(x):
    with prioritized(True):
        inside = uses_priority.get()
        y = x * 2 if inside else x - 1
    return y + 1, inside, uses_priority.get()


def test_a_set_and_reset_in_a_with_block_is_one_graph():
    compiled = Compiled(block, fullgraph=True)
    x = torch.randn(4)
    got, expected = compiled(x), block(x)
    assert same(got, expected) and got[1:] == (True, False)
    assert uses_priority.get() is False
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    assert same(compiled(x), expected) and compiled.backend.graph_count == 1


def reads(x):
    return x * scale.get() if uses_priority.get() else x + 1


def test_the_entry_value_is_guarded():
    compiled = Compiled(reads, fullgraph=True)
    x = torch.randn(4)
    assert same(compiled(x), x + 1)
    token = uses_priority.set(True)
    try:
        assert same(compiled(x), x * scale.get())  # another entry value: another trace
        s_token = scale.set(3.0)
        try:
            assert same(compiled(x), x * 3.0)
        finally:
            scale.reset(s_token)
    finally:
        uses_priority.reset(token)
    assert compiled.backend.graph_count == 3
    assert same(compiled(x), x + 1) and compiled.backend.graph_count == 3


def test_a_graph_leaving_a_variable_set_is_refused_and_eager_sets_it():
    def fn(x):
        uses_priority.set(True)
        return x + 1

    compiled = Compiled(fn)
    x = torch.randn(3)
    ctx = contextvars.copy_context()
    out = ctx.run(compiled, x)
    assert same(out, x + 1)
    assert ctx[uses_priority] is True  # eager's effect, kept
    assert uses_priority.get() is False
    assert compiled.backend.graph_count == 0


def test_a_variable_with_no_value_is_left_to_eager():
    def fn(x):
        try:
            return x + no_default.get()
        except LookupError:
            return x - 1

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), x - 1)


def test_a_reset_twice_raises_as_eager_does():
    def fn(x):
        token = uses_priority.set(True)
        uses_priority.reset(token)
        try:
            uses_priority.reset(token)
        except RuntimeError:
            return x + 1
        return x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x)) and same(compiled(x), x + 1)
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize("value", [2.0, 5.0])
def test_a_value_set_by_the_caller_is_read(value):
    compiled = Compiled(reads, fullgraph=True)
    x = torch.randn(3)

    def run():
        uses_priority.set(True)
        scale.set(value)
        return compiled(x)

    assert same(contextvars.copy_context().run(run), x * value)
