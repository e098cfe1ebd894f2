"""Python's numeric builtins and torch.sym_* on sizes (variables/sym_builtins.py): kept symbolic
under automatic dynamic shapes, so a snippet compiles once more (the symbolic trace) and then
never again across sizes; results match eager; torch.compile is the oracle for how many
graphs each snippet may take. `range(n)` still specializes, with its guard and its line."""

from __future__ import annotations

import logging
import math
import operator

import pytest
import torch
import torch._dynamo

from conftest import Compiled, same

SIZES = (4, 5, 6, 7, 9, 12)


def f_max(x):
    return x.new_ones(max(x.shape[0], 3)) * 2


def f_max_of_size(x):
    return x.sum() * max(x.shape)


def f_max_list(x):
    return x.new_ones(max([x.shape[0], 3, x.shape[1] - 2])) + 1


def f_min(x):
    return x[: min(x.shape[0], x.shape[1] + 1)] + 1


def f_sym_max(x):
    return x.new_ones(torch.sym_max(x.shape[0], 3)) + torch.sym_min(x.shape[0], 100)


def f_int(x):
    return x.view(int(x.shape[0]), -1) * 2


def f_int_arange(x):
    n = int(x.size(0))
    return torch.arange(n) + x.sum()


def f_index(x):
    return x.new_zeros(operator.index(x.shape[0])) + 1


def f_int_of_float(x):
    return x.new_zeros(int(x.shape[0] / 2)) + 1


def f_float(x):
    return x * float(x.shape[0])


def f_float_int_tensor(x):
    return x.long() * float(x.shape[0])  # float(n) must stay a float: a float result


def f_ceil(x):
    return x.new_zeros(math.ceil(x.shape[0] / 2)) + 1


def f_floor_trunc(x):
    return x.new_zeros(math.floor(x.shape[0] / 2) + math.trunc(x.shape[0] / 4)) + 1


def f_floordiv_mod(x):
    return x.new_zeros(x.shape[0] % 3 + (x.shape[0] + 1) // 2) + 1


def f_divmod(x):
    q, r = divmod(x.shape[0], 3)
    return x.new_zeros(q + r + 1) + 1


def f_abs(x):
    return x.new_zeros(abs(x.shape[0] - 20)) + 1


def f_returns_sizes(x):
    q, r = divmod(x.shape[0], 3)
    return x + 1, max(x.shape[0], 3), int(x.shape[0]), q, r, math.ceil(x.shape[0] / 2)


# snippet -> (graphs over SIZES, a target that must be in the symbolic graph or None)
SNIPPETS = {
    f_max: (2, torch.sym_max),
    f_max_of_size: (2, torch.sym_max),
    f_max_list: (2, torch.sym_max),
    f_min: (2, torch.sym_min),
    f_sym_max: (2, torch.sym_max),
    f_int: (2, None),
    f_int_arange: (2, None),
    f_index: (2, None),
    f_int_of_float: (2, operator.floordiv),
    f_float: (2, torch.sym_float),
    f_float_int_tensor: (2, torch.sym_float),
    f_ceil: (2, operator.neg),  # ceil(n / 2) computed as -((-n) // 2)
    f_floor_trunc: (2, operator.floordiv),
    f_floordiv_mod: (2, operator.mod),
    f_divmod: (2, operator.mod),
    f_abs: (2, torch.sym_max),  # |n - 20| as max(n - 20, 20 - n): no guard on the sign
    f_returns_sizes: (2, None),
}


def torch_compile_graphs(fn) -> int:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    for n in SIZES:
        compiled(torch.randn(n, 8))
    torch._dynamo.reset()
    return len(graphs)


@pytest.mark.parametrize("fn", list(SNIPPETS), ids=lambda f: f.__name__)
def test_size_expressions_stay_symbolic(fn):
    graphs, target = SNIPPETS[fn]
    compiled = Compiled(fn)
    for n in SIZES:
        x = torch.randn(n, 8)
        got, want = compiled(x), fn(x)
        assert same(got, want), (n, got, want)
        if isinstance(want, tuple):
            assert [type(g) for g in got] == [type(w) for w in want]  # ints stay ints
    assert compiled.backend.graph_count == graphs  # the static trace, then one symbolic one
    assert not compiled.breaks
    symbolic = compiled.compiler.records[1].guards.source_code
    for n in SIZES[1:]:
        assert f"L['x'].size()[0] == {n}" not in symbolic  # never specialized
    if target is not None:
        nodes = compiled.backend.graphs[1].graph.nodes
        assert target in [n.target for n in nodes if n.op == "call_function"]


# torch.compile gives up on divmod of a SymInt: the frame runs eagerly after its first
# graph (one graph in all, not a symbolic one), so it is no oracle for these
NO_ORACLE = {f_divmod, f_returns_sizes}


@pytest.mark.parametrize(
    "fn", [f for f in SNIPPETS if f not in NO_ORACLE], ids=lambda f: f.__name__
)
def test_no_more_graphs_than_torch_compile(fn):
    compiled = Compiled(fn)
    for n in SIZES:
        compiled(torch.randn(n, 8))
    assert compiled.backend.graph_count <= torch_compile_graphs(fn)


def test_int_argument_through_max_and_divmod():
    def f(x, n):
        q, r = divmod(n, 4)
        return x * max(n, 3) + q - r

    compiled = Compiled(f)
    x = torch.randn(3)
    for n in (5, 6, 9, 2, 13):
        assert same(compiled(x, n), f(x, n))
    assert compiled.backend.graph_count == 2
    assert torch.sym_max in [n.target for n in compiled.backend.graphs[1].graph.nodes]


def test_floats_and_keys_still_fold_exactly():
    """max() over floats (NaN, the first of equal values) and key= are decided at trace time,
    specializing with a guard: right results, a graph per size."""

    def f(x):
        return x * max(x.shape[0], 6.5) + x.new_ones(1) * max(x.shape[0], 3, key=lambda v: -v)

    compiled = Compiled(f)
    for n in (4, 5, 8):
        x = torch.randn(n)
        got, want = compiled(x), f(x)
        assert same(got, want)
    assert compiled.backend.graph_count == 3


def f_range(x):
    out = x
    for i in range(x.shape[0]):  # the loop unrolls: the length must be a constant
        out = out + i
    return out


def test_range_over_a_size_specializes_with_its_guard_and_line(caplog):
    compiled = Compiled(f_range)
    with caplog.at_level(logging.INFO, logger="ember.dynamic"):
        for n in (3, 4, 5):
            x = torch.randn(n, 2)
            assert same(compiled(x), f_range(x))
    assert compiled.backend.graph_count == 3  # one per length, as torch.compile
    assert "L['x'].size()[0] == 4" in compiled.compiler.records[1].guards.source_code
    line = f_range.__code__.co_firstlineno + 2
    logged = [r.getMessage() for r in caplog.records if r.name == "ember.dynamic"]
    assert any(
        "guard: L['x'].size()[0] == 4" in m and f"test_sym_builtins.py:{line}" in m for m in logged
    ), logged


def test_bit_operators_on_a_size_use_its_value_and_a_read_value_breaks():
    # no symbolic form for | & ^ << >> ~: a size is made its value (guarded: a new size
    # compiles again), an int read from a tensor (only the run knows it) is a break
    def on_size(x):
        n = x.shape[0]
        return x * (n | 1) + (n & 2) + (n ^ 3) + (n << 1) + (n >> 1) + ~n

    compiled = Compiled(on_size, fullgraph=True, dynamic=True)
    for size in (4, 7, 4):
        x = torch.randn(size)
        assert same(compiled(x), on_size(x))
    assert compiled.backend.graph_count == 2

    def on_item(x, t):
        return x * (t.item() | 1)

    compiled = Compiled(on_item, capture_scalar_outputs=True)
    x = torch.randn(3)
    for v in (2, 5):
        assert same(compiled(x, torch.tensor(v)), on_item(x, torch.tensor(v)))
    assert any("data-dependent" in b.reason for b in compiled.breaks)
