"""A graph break inside `with obj:` where obj's class has Python __enter__/__exit__: the
graph before the break runs, the break runs eagerly inside the block, and the resume
function holds the object's __exit__ (bound to the object rebuilt after the graph) and
calls it when the block ends, once, as eager does (recipe_rules.py `_context_exit`).
packages/ember/tests/test_context_breaks.py runs the same under inductor."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break

EXITS: list[bool] = []  # the mode each exit put back, in order


class GradSetter:
    """Sets grad mode on entry, puts the mode it was made under back on exit; logs exits."""

    def __init__(self, mode):
        self.saved = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, kind, value, tb):
        EXITS.append(self.saved)
        torch._C._set_grad_enabled(self.saved)


def one_block(x):
    with GradSetter(True):
        y = x + 1
        if torch.is_grad_enabled():
            y = y * 2
        graph_break()
        y = torch.relu(y) * x
    return y - 1, torch.is_grad_enabled()


def nested_blocks(x):
    with GradSetter(True):
        y = x * 3
        with GradSetter(False):
            if torch.is_grad_enabled():
                y = y - 3
            graph_break()
            y = y * 1.5
        y = y.sin() * x
    return y, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [one_block, nested_blocks])
@pytest.mark.parametrize("outer_grad", [False, True])
def test_break_inside_a_user_with_block(fn, outer_grad):
    x = torch.rand(2, 3, requires_grad=True)
    compiled = Compiled(fn)
    with torch.set_grad_enabled(outer_grad):
        EXITS.clear()
        expected = fn(x)
        eager_exits = list(EXITS)
        EXITS.clear()
        got = compiled(x)
        assert torch.is_grad_enabled() is outer_grad
    assert eager_exits == EXITS
    assert same(got[0], expected[0]) and got[1] == expected[1]
    assert got[0].requires_grad == expected[0].requires_grad
    assert compiled.backend.graph_count == 2  # before the break, after it
    assert len(compiled.breaks) == 1


def test_a_context_object_passed_in_is_the_one_exited():
    def fn(x, ctx):
        with ctx:
            y = x.cos()
            graph_break()
            y = y + 1
        return y

    x = torch.rand(3)
    ctx = GradSetter(False)
    compiled = Compiled(fn)
    EXITS.clear()
    assert same(compiled(x, ctx), fn(x, GradSetter(False)))
    assert EXITS == [True, True] and torch.is_grad_enabled()
    assert compiled.backend.graph_count == 2
