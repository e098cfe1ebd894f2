"""Branches, loops and graph breaks with resume functions."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.exc import Unsupported

a0 = torch.randn(10)
b0 = torch.randn(10)


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@pytest.mark.parametrize("sign", [1, -1])
def test_toy_example_three_graphs(sign):
    b = b0.abs() * sign
    compiled = Compiled(toy_example)
    assert same(compiled(a0, b), toy_example(a0, b))
    assert compiled.backend.ops(0) == ["abs", "add", "truediv", "sum", "lt"]
    assert compiled.backend.graph_count == 2
    assert compiled.backend.ops(1) == (["mul", "mul"] if sign < 0 else ["mul"])
    assert len(compiled.breaks) == 1
    assert "data-dependent" in compiled.breaks[0].reason
    assert compiled.breaks[0].location.endswith(f":{toy_example.__code__.co_firstlineno + 2}")


def test_toy_example_under_fullgraph_names_the_if_line():
    compiled = Compiled(toy_example, fullgraph=True)
    with pytest.raises(Unsupported) as info:
        compiled(a0, b0)
    assert f"{__file__}:{toy_example.__code__.co_firstlineno + 2}" in str(info.value)


def test_constant_branches_are_resolved():
    def fn(a, flag, mode):
        if flag:
            a = a + 1
        if mode == "double":
            a = a * 2
        elif mode is None:
            a = a - 1
        return a

    for flag, mode in [(True, "double"), (False, None), (True, "other")]:
        compiled = Compiled(fn)
        assert same(compiled(a0, flag, mode), fn(a0, flag, mode))
        assert compiled.backend.graph_count == 1


def test_loops_unroll():
    def fn(a, n):
        for i in range(n):
            a = a * 2 + i
        total = 0
        for v in [a, a, a]:
            total = total + v
        while n > 0:
            n -= 1
            total = total - 1
        return total

    compiled = Compiled(fn)
    assert same(compiled(a0, 3), fn(a0, 3))
    assert compiled.backend.graph_count == 1
    assert compiled.backend.op_count == 3 * 2 + 3 + 3


def test_loop_over_tensor_rows_and_enumerate_zip():
    def fn(a):
        out = []
        for i, (row, other) in enumerate(zip(a, a.flip(0), strict=True)):
            out.append(row * i + other)
        return torch.stack(out)

    a = torch.randn(3, 4)
    compiled = Compiled(fn)
    assert same(compiled(a), fn(a))
    assert compiled.backend.graph_count == 1


def test_print_breaks_the_graph_and_continues(capsys):
    def fn(a):
        b = a.sin()
        print("middle", 1)
        return b.cos() + a

    compiled = Compiled(fn)
    assert same(compiled(a0), fn(a0))
    assert "middle 1" in capsys.readouterr().out
    assert compiled.backend.graph_count == 2
    assert compiled.backend.ops(0) == ["sin"] and compiled.backend.ops(1) == ["cos", "add"]
    assert "print" in compiled.breaks[0].reason


def test_item_breaks_and_python_value_flows_on():
    def fn(a):
        s = a.sum().item()
        return a * s

    compiled = Compiled(fn)
    assert same(compiled(a0), fn(a0))
    assert compiled.backend.graph_count == 2


def test_break_inside_nested_call_breaks_at_the_call_site():
    def helper(t):
        print("in helper")
        return t + 1

    def fn(a):
        b = a * 2
        c = helper(b)
        return c - a

    compiled = Compiled(fn)
    assert same(compiled(a0), fn(a0))
    # fn: graph before the call, the helper's own frame, and the resumed rest.
    assert compiled.backend.graph_count >= 2
    assert len(compiled.breaks) >= 1


def test_break_keeps_live_locals_and_stack():
    def fn(a, b):
        x = a + 1
        y = [x, b]
        z = torch.cat([x, b + print("") if False else b]) if True else None
        print("break")
        return x * 2, y[1] + 1, z.sum()

    compiled = Compiled(fn)
    assert same(compiled(a0, b0), fn(a0, b0))


def test_branch_on_tensor_both_ways_reuses_resume_functions():
    compiled = Compiled(toy_example)
    for b in (b0.abs(), -b0.abs(), b0.abs(), -b0.abs()):
        assert same(compiled(a0, b), toy_example(a0, b))
    # toy_example once, each resume function once: no recompiles on the repeats.
    assert compiled.backend.graph_count == 3


def test_fullgraph_without_breaks_compiles():
    compiled = Compiled(lambda a: a.sin() + 1, fullgraph=True)
    assert same(compiled(a0), a0.sin() + 1)


def _sine(t):
    return t.sin()


def _sine_in_and_out_of_try(t):
    u = _sine(t)  # the same code inlined outside, then inside a user's try/except
    try:
        u = _sine(u)
    except RuntimeError:
        u = u + 1
    return _sine(u)


class _UserError(Exception):
    pass


def _lookup_or_reraise(idx, table):
    try:  # LayoutLM's embeddings: an except clause that only raises a clearer error
        rows = torch.nn.functional.embedding(idx, table)
    except IndexError as e:
        raise IndexError("indices must be below the table's length") from e
    return rows.sum(-1)


def _lookup_or_bare_reraise(idx, table):
    try:
        rows = torch.nn.functional.embedding(idx, table)
    except (IndexError, RuntimeError):
        raise
    return rows.sum(-1)


_handled: list = []


def _lookup_noting_the_error(idx, table):
    try:
        rows = torch.nn.functional.embedding(idx, table)
    except IndexError as e:
        _handled.append(e)  # an effect of the handler's: the graph would skip it
        raise
    return rows.sum(-1)


def _lookup_raising_a_user_class(idx, table):
    try:
        rows = torch.nn.functional.embedding(idx, table)
    except IndexError as e:
        raise _UserError("bad index") from e  # its __init__ is user code
    return rows.sum(-1)


def _lookup_or_default(idx, table):
    try:
        rows = torch.nn.functional.embedding(idx, table)
    except IndexError:
        rows = table[:1]  # the handler swallows the error
    return rows.sum(-1)


@pytest.mark.parametrize("fn", [_lookup_or_reraise, _lookup_or_bare_reraise])
def test_ops_under_an_except_clause_that_only_raises_are_one_graph(fn):
    table = torch.randn(5, 3)
    compiled = Compiled(fn)
    idx = torch.tensor([[0, 4], [2, 1]])
    assert same(compiled(idx, table), fn(idx, table))
    assert compiled.breaks == [] and compiled.backend.graph_count == 1
    assert compiled.backend.ops(0) == ["embedding", "sum"]
    with pytest.raises(IndexError):  # the graph's own error, where eager raises the handler's
        compiled(torch.tensor([[0, 7]]), table)


@pytest.mark.parametrize(
    "fn", [_lookup_noting_the_error, _lookup_raising_a_user_class, _lookup_or_default]
)
def test_ops_under_an_except_clause_that_does_more_break_the_graph(fn):
    table = torch.randn(5, 3)
    compiled = Compiled(fn)
    idx = torch.tensor([[0, 4], [2, 1]])
    assert same(compiled(idx, table), fn(idx, table))
    assert any("try/except" in str(b) for b in compiled.breaks)
    bad = torch.tensor([[0, 7]])
    _handled.clear()
    if fn is _lookup_or_default:
        assert same(compiled(bad, table), fn(bad, table))
    else:
        with pytest.raises((IndexError, _UserError)) as info:
            compiled(bad, table)
        assert type(info.value) is (IndexError if fn is _lookup_noting_the_error else _UserError)
    assert len(_handled) == (fn is _lookup_noting_the_error)


def test_one_function_inlined_in_and_out_of_a_try():
    """An inlined function's code is decoded once per trace and shared by its calls: whether
    a caller's handler covers a call is still read from that caller, call by call."""
    compiled = Compiled(_sine_in_and_out_of_try)
    assert same(compiled(a0), _sine_in_and_out_of_try(a0))
    assert compiled.backend.ops(0) == ["sin"]
    assert any("try/except" in str(b) for b in compiled.breaks)
