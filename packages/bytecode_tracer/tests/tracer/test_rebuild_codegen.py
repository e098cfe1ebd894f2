"""The runner's rebuild as one generated function (rebuild_codegen.py): same values, same
object identities and cycles, same writes in the same order as the recipe closures, and the
closures kept where a recipe has no code form and the frame builds objects (issue 15)."""

from __future__ import annotations

import numpy as np
import torch

from conftest import Compiled, same

x = torch.randn(4, 3)


class Node:
    """Built in the trace: rebuilt as `Node.__new__(Node)` plus its attributes."""

    def __init__(self, t):
        self.t = t
        self.me = self  # a cycle


class Holder:
    pass


HOLDER = Holder()
COUNT = 0


def _runners(compiled: Compiled) -> list:
    return [r.runner for r in compiled.compiler.records if r.runner is not None]


def test_objects_built_in_the_trace_keep_identity_and_cycles():
    def fn(a):
        n = Node(a + 1)
        return [n, n], (a * 2, {"k": n.t})

    compiled = Compiled(fn)
    for _ in range(2):  # a fresh object per call
        (first, second), (doubled, entries) = compiled(x)
        assert first is second and first.me is first and type(first) is Node
        assert same(first.t, x + 1) and same(doubled, x * 2) and entries["k"] is first.t
    assert compiled(x)[0][0] is not first
    (runner,) = _runners(compiled)
    assert runner.rebuild is not None
    assert "__new__" in runner.rebuild.source_code
    assert compiled.backend.graph_count == 1


def test_writes_read_everything_first_then_apply_in_order():
    def fn(a, items, table):
        global COUNT
        old = items[0]
        items[0] = a * 3  # a list written in place
        table["seen"] = old  # a dict written in place
        HOLDER.last = items  # an attribute
        COUNT = COUNT + 1  # a global
        return old + 1, items

    items, table = [x.clone()], {}
    expected_items, expected_table = [x.clone()], {}
    global COUNT
    COUNT = 0
    compiled = Compiled(fn)
    out = compiled(x, items, table)
    got_holder, got_count = HOLDER.last, COUNT
    COUNT = 0
    expected = fn(x, expected_items, expected_table)
    assert same(out[0], expected[0]) and out[1] is items and same(items, expected_items)
    assert same(table["seen"], expected_table["seen"]) and got_holder is items
    assert got_count == COUNT == 1
    (runner,) = _runners(compiled)
    source = runner.rebuild.source_code
    assert "[:] = " in source and ".clear()" in source and "setattr(" in source
    assert source.index("setattr(") > source.index(".clear()")  # applies after every read


def test_a_recipe_without_code_form_keeps_the_closures_when_objects_are_built():
    def fn(a):
        n = Node(a.sum())
        return n, (a * 2).numpy()  # the array's recipe has no code form

    compiled = Compiled(fn)
    n, array = compiled(x)
    assert n.me is n and same(n.t, x.sum())
    np.testing.assert_allclose(array, (x * 2).numpy())
    (runner,) = _runners(compiled)
    assert runner.rebuild is None


def test_without_objects_a_closure_recipe_is_called_from_the_generated_code():
    def fn(a):
        return (a * 2).numpy(), [a + 1]

    compiled = Compiled(fn)
    array, (plus,) = compiled(x)
    np.testing.assert_allclose(array, (x * 2).numpy())
    assert same(plus, x + 1)
    (runner,) = _runners(compiled)
    assert runner.rebuild is not None and "(outs, L, G)" in runner.rebuild.source_code
