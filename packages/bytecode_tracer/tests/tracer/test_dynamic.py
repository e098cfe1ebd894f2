"""Symbolic shapes in the tracer (dynamic.py, variables/sym_values.py), backend eager:
the dynamic=None|True|False policy, SymInt placeholders for ints, sizes kept symbolic
through arithmetic and tensor ops, shape guards, marks, data-dependent output sizes."""

from __future__ import annotations

import logging
import operator

import pytest
import torch

import ember_symbolic as es
from conftest import Compiled
from ember_bytecode_tracer.dynamic import (
    DynamicMarkError,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
)


def same(a, b):
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b)
    return a == b and type(a) is type(b)


def placeholders(gm):
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def talk_fn(x, n):
    y = x**2
    if n >= 0:
        return (n + 1) * y
    else:
        return y / n


def test_int_argument_becomes_a_symint_placeholder_after_one_change():
    compiled = Compiled(talk_fn)
    x = torch.randn(20)
    counts = []
    for n in (2, 3, 6, -3, -5):
        assert same(compiled(x, n), talk_fn(x, n))
        counts.append(compiled.backend.graph_count)
    assert counts == [1, 2, 2, 3, 3]  # n=2 static, n=3 symbolic, 6 reuses, -3 the other branch
    first, dynamic, _negative = compiled.backend.graphs
    assert [type(p.meta["example_value"]) for p in placeholders(first)] != [
        type(p.meta["example_value"]) for p in placeholders(dynamic)
    ]
    n_node = placeholders(dynamic)[1]
    assert isinstance(n_node.meta["example_value"], torch.SymInt)
    assert "add" in compiled.backend.ops(1) and "mul" in compiled.backend.ops(1)
    assert "truediv" in compiled.backend.ops(2)
    guards = compiled.compiler.records[1].guards.source_code
    assert "L['n'] >= 0" in guards
    assert "L['n'] < 0" in compiled.compiler.records[2].guards.source_code
    reason = compiled.compiler.records[2].recompile_reason
    assert "shape guard failed: L['n'] >= 0" in reason and "test_dynamic.py" in reason


def test_dynamic_false_never_symbolic():
    compiled = Compiled(talk_fn, dynamic=False)
    x = torch.randn(8)
    for n in (2, 3, 4):
        assert same(compiled(x, n), talk_fn(x, n))
    assert compiled.backend.graph_count == 3
    for gm in compiled.backend.graphs:
        assert all(isinstance(p.meta["example_value"], torch.Tensor) for p in placeholders(gm))


def batch_fn(x, w):
    return (x @ w).relu().sum(1) + x.shape[0]


def test_varying_batch_size_compiles_twice_and_matches():
    compiled = Compiled(batch_fn)
    w = torch.randn(8, 4)
    for b in range(2, 22):
        x = torch.randn(b, 8)
        assert same(compiled(x, w), batch_fn(x, w))
    assert compiled.backend.graph_count == 2
    size = placeholders(compiled.backend.graphs[1])[0].meta["example_value"].shape[0]
    assert isinstance(size, torch.SymInt)
    # the weight's sizes never changed: they stay static
    w_fake = placeholders(compiled.backend.graphs[1])[1].meta["example_value"]
    assert all(isinstance(s, int) for s in w_fake.shape)


def test_dynamic_true_is_symbolic_from_the_first_call():
    compiled = Compiled(batch_fn, dynamic=True)
    w = torch.randn(8, 4)
    for b in (3, 5, 9):
        x = torch.randn(b, 8)
        assert same(compiled(x, w), batch_fn(x, w))
    assert compiled.backend.graph_count == 1
    x_fake = placeholders(compiled.backend.graphs[0])[0].meta["example_value"]
    assert isinstance(x_fake.shape[0], torch.SymInt)


def test_size_arithmetic_view_reshape_arange_stay_symbolic():
    def fn(x):
        b, d = x.shape
        y = x.view(b, d // 2, 2).sum(-1)
        z = x.reshape(-1)[: x.numel() // 2]
        r = torch.arange(b * 2, dtype=x.dtype).view(b, 2)
        e = y.new_zeros(x.size(0), 1).expand(b, d // 2)
        f = torch.full((b, 1), 0.5)
        return y + e + f, z.sum(), r, x.size(0) * 3 - 1, x.shape

    compiled = Compiled(fn, dynamic=True)
    for b in (3, 4, 7):
        x = torch.randn(b, 6)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    gm = compiled.backend.graphs[0]
    sizes = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "size"]
    assert sizes and all(isinstance(n.meta["example_value"], torch.SymInt) for n in sizes)
    arith = [n for n in gm.graph.nodes if n.target in (operator.mul, operator.add)]
    assert any(isinstance(n.meta["example_value"], torch.SymInt) for n in arith)


def test_branch_on_a_size_adds_a_guard_without_a_break():
    def fn(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    compiled = Compiled(fn, dynamic=True)
    for b in (2, 3, 5, 6, 4):
        x = torch.randn(b, 3)
        assert same(compiled(x), fn(x))
    assert not compiled.breaks
    assert compiled.backend.graph_count == 2  # one per side of the branch
    assert "L['x'].size()[0] <= 4" in compiled.compiler.records[0].guards.source_code


def test_mark_dynamic_min_max_and_out_of_range_retraces():
    def fn(x):
        return x.cos() * x.shape[0]

    compiled = Compiled(fn)
    for b in (4, 6, 8):
        x = torch.randn(b, 3)
        mark_dynamic(x, 0, min=2, max=10)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1  # symbolic from the first call
    x = torch.randn(12, 3)
    mark_dynamic(x, 0, min=2, max=10)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert "L['x'].size()[0] <= 10" in compiled.compiler.records[-1].recompile_reason


def test_constraint_violation_names_the_line():
    def fn(x):
        if x.shape[0] == 4:  # forces the marked dim to a constant
            return x + 1
        return x - 1

    compiled = Compiled(fn)
    x = torch.randn(4, 3)
    mark_dynamic(x, 0)
    with pytest.raises(es.ConstraintViolationError) as info:
        compiled(x)
    line = fn.__code__.co_firstlineno + 1
    assert f"test_dynamic.py:{line}" in str(info.value)


def test_a_branch_that_splits_a_marked_range_is_a_constraint_violation():
    # mark_dynamic(min=2, max=6): one graph for every size in the range; `size == 3` being
    # false leaves size 3 to another graph: the error names the line, as for a constant
    def fn(x):
        if x.shape[0] == 3:
            return x.sin()
        return x.cos()

    x = torch.randn(5, 2)
    mark_dynamic(x, 0, min=2, max=6)
    with pytest.raises(es.ConstraintViolationError, match="size 3 of that range") as info:
        Compiled(fn)(x)
    assert f"test_dynamic.py:{fn.__code__.co_firstlineno + 1}" in str(info.value)
    # without a range, a mark only refuses a constant: the branch is a guard, one graph
    compiled = Compiled(fn)
    for b in (5, 6):
        x = torch.randn(b, 2)
        mark_dynamic(x, 0)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_mark_static_and_maybe_mark_dynamic():
    def fn(x):
        return x + x.shape[0]

    compiled = Compiled(fn, dynamic=True)
    for b in (3, 5):
        x = torch.randn(b, 2)
        mark_static(x, 0)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2

    compiled = Compiled(fn)
    for b in (3, 5, 7):
        x = torch.randn(b, 2)
        maybe_mark_dynamic(x, 0)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: mark_dynamic([1, 2], 0), TypeError),
        (lambda: mark_dynamic(torch.ones(3, 2), 2), DynamicMarkError),
        (lambda: mark_dynamic(torch.ones(3, 2), "0"), TypeError),
        (lambda: mark_dynamic(torch.ones(3, 2), 0, min=5, max=4), DynamicMarkError),
        (lambda: mark_dynamic(torch.ones(1, 2), 0), DynamicMarkError),
        (lambda: mark_static(torch.ones(()), 0), DynamicMarkError),
    ],
)
def test_bad_marks_raise_typed_errors(call, error):
    with pytest.raises(error, match="mark"):
        call()


SCALE = 2


def test_int_global_becomes_symbolic():
    def fn(x):
        return x * SCALE

    compiled = Compiled(fn)
    x = torch.randn(4)
    for value in (2, 3, 4, 5):
        globals()["SCALE"] = value
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2


def test_symbolic_size_returned_and_stored():
    def fn(x):
        n = x.shape[0] * 2
        return x.sum(), n, x.shape[1:]

    compiled = Compiled(fn, dynamic=True)
    for b in (3, 6):
        x = torch.randn(b, 5)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_logs_symbols_and_guards(caplog):
    compiled = Compiled(talk_fn)
    x = torch.randn(4)
    with caplog.at_level(logging.INFO, logger="ember.dynamic"):
        compiled(x, 2)
        compiled(x, 3)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "create_symbol s0 = 3 for L['n']" in text
    assert "guard: L['n'] >= 0" in text and "test_dynamic.py" in text


@pytest.mark.parametrize("capture", [False, True])
def test_nonzero_capture_flag(capture):
    def fn(x):
        idx = torch.nonzero(x > 0)
        return idx.float().sum() + idx.shape[0]

    compiled = Compiled(fn, dynamic=True, capture_dynamic_output_shape_ops=capture)
    for _ in range(3):
        x = torch.randn(10)
        assert same(compiled(x), fn(x))
    if capture:
        assert not compiled.breaks and compiled.backend.graph_count == 1
        assert "nonzero" in compiled.backend.ops(0)
    else:
        assert compiled.breaks


def test_branch_on_a_data_dependent_size_is_a_graph_break():
    def fn(x):
        idx = torch.nonzero(x > 0)
        if idx.shape[0] > 3:
            return idx.sum() + 1
        return idx.sum() - 1

    compiled = Compiled(fn, dynamic=True, capture_dynamic_output_shape_ops=True)
    for _ in range(4):
        x = torch.randn(8)
        assert same(compiled(x), fn(x))
    assert any("data-dependent size" in b.reason for b in compiled.breaks)
    assert not compiled.compiler.skipped  # the condition is computed in the graph


def test_backend_refusing_symbolic_graphs_gets_static_ones(caplog):
    seen = []

    def static_only(gm, example_inputs):
        values = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]
        if any(isinstance(s, torch.SymInt) for v in values for s in v.shape):
            raise NotImplementedError("symbolic sizes")
        seen.append(gm)
        return gm.forward

    compiled = Compiled(batch_fn)
    compiled.compiler.backend = static_only
    w = torch.randn(8, 4)
    with caplog.at_level(logging.WARNING, logger="ember.tracer"):
        for b in (2, 3, 4, 5):
            x = torch.randn(b, 8)
            assert same(compiled(x, w), batch_fn(x, w))
    assert len(seen) == 4  # one static compile per size, no crash
    assert any("static shapes" in r.getMessage() for r in caplog.records)


def test_size_comparisons_guard_relations_instead_of_specializing():
    def fn(x, y):
        out = x + y if x.size() == y.size() else x.sum() + y.sum()
        if x.shape[1:] == (4,):
            out = out * 2
        return out

    compiled = Compiled(fn)
    for b in (2, 3, 5):
        x, y = torch.randn(b, 4), torch.randn(b, 4)
        mark_dynamic(x, 0)
        mark_dynamic(y, 0)
        assert same(compiled(x, y), fn(x, y))
    assert compiled.backend.graph_count == 1
    assert "L['x'].size()[0] == L['y'].size()[0]" in compiled.compiler.records[0].guards.source_code


def test_index_with_a_symbolic_int_selects_without_specializing():
    def fn(x, n):
        return x[n] * 2 + x[n - 1]

    compiled = Compiled(fn)
    x = torch.randn(10, 3)
    for n in (2, 3, 5, 9):
        assert same(compiled(x, n), fn(x, n))
    assert compiled.backend.graph_count == 2
    assert "select" in compiled.backend.ops(1)
    with pytest.raises(IndexError):
        compiled(x, 12)


def test_guards_a_backend_adds_name_the_backend():
    """A backend that retraces the graph on the symbolic example values may add guards of its
    own (aten's CUDA sdpa kernel choice did): they say so, instead of naming the user's line."""

    def specializing_backend(gm, example_inputs):
        x = next(n for n in gm.graph.nodes if n.op == "placeholder").meta["example_value"]
        assert x.shape[0] == 5  # reading the size as a constant: the guard Eq(s0, 5)
        return gm.forward

    def f(x):
        return x * 2

    compiled = Compiled(f, dynamic=True)
    compiled.compiler.backend = specializing_backend
    assert torch.equal(compiled(torch.ones(5)), torch.ones(5) * 2)
    source = compiled.compiler.records[0].guards.source_code
    line = f.__code__.co_firstlineno + 1
    assert "L['x'].size()[0] == 5" in source
    assert "backend specializing_backend compiling the graph ending at" in source
    assert f"test_dynamic.py:{line}" in source


PADS = [
    ("constant", (1, 2)),
    ("constant", (-1, 2, 1, -1)),  # negative pads crop
    ("reflect", (2, 1)),
    ("replicate", (1, 3)),
    ("circular", (1, 2)),
]


@pytest.mark.parametrize(("mode", "pad"), PADS, ids=lambda p: str(p))
def test_pad_of_a_symbolic_length_compiles_once(mode, pad):
    # constant_pad_nd's C++ composite reads concrete sizes on CPU fakes too: without the
    # Python dispatcher every length was its own graph, guarded by Eq(s1, n) (issue 13)
    def fn(x):
        return torch.nn.functional.pad(x, pad, mode=mode) * 2

    compiled = Compiled(fn, dynamic=True)
    for n in (5, 6, 7, 9):
        x = torch.randn(2, 3, n)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    out = next(n for n in compiled.backend.graphs[0].graph.nodes if n.op == "output")
    assert isinstance(out.args[0][0].meta["example_value"].shape[-1], torch.SymInt)


def test_constant_pad_nd_of_a_symbolic_length_compiles_once():
    def fn(x):
        return torch.constant_pad_nd(x, (2, -1), 0.5) + 1

    compiled = Compiled(fn, dynamic=True)
    for n in (5, 6, 8):
        x = torch.randn(3, n)
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_a_size_pinned_by_a_shape_guard_fails_like_a_static_tensor_check():
    def fn(x, bias):
        if x.shape[0] == 6:  # a dynamic size compared with an int: Eq(s0, 6)
            return x.cos() + bias
        return x.sin() + bias

    compiled = Compiled(fn, dynamic=True)
    bias = torch.randn(3)
    for rows in (6, 5):
        x = torch.randn(rows, 3)
        assert same(compiled(x, bias), fn(x, bias))
    assert compiled.backend.graph_count == 2
    reason = compiled.compiler.records[1].recompile_reason
    assert reason.startswith("tensor 'x' size mismatch at index 0. expected 6, actual 5; ")
    assert "shape guard failed: L['x'].size()[0] == 6" in reason

    def bounded(x):
        return x * 2 if x.shape[0] > 4 else x - 1  # a bound, not a pin: no tensor lead

    compiled = Compiled(bounded, dynamic=True)
    for rows in (6, 3):
        x = torch.randn(rows)
        assert same(compiled(x), bounded(x))
    reason = compiled.compiler.records[1].recompile_reason
    assert reason.startswith("shape guard failed: L['x'].size()[0] > 4"), reason
