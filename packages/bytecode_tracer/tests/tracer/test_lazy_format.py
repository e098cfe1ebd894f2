"""f-strings over symbolic sizes (variables/lazy_format.py): the size is specialized, and
guarded, only when the string is used; a dropped f-string leaves the size dynamic. Backend
eager; integration_tests/test_guard_precision_inductor.py runs one under inductor."""

from __future__ import annotations

import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break


def sizes_seen(compiled, fn, rows_list, cols=3):
    for rows in rows_list:
        x = torch.randn(rows, cols)
        assert same(compiled(x), fn(x))
    return compiled.backend.graph_count


def test_a_dropped_fstring_over_a_size_guards_nothing():
    def fn(x):
        y = x.sin()
        f"{x.shape[0]} rows"  # an expression statement: its value is thrown away
        f"{x.shape[1]:>4}"
        return y

    compiled = Compiled(fn, dynamic=True)
    assert sizes_seen(compiled, fn, (5, 6, 9)) == 1
    assert "== 5" not in compiled.compiler.records[0].guards.source_code


def test_a_used_fstring_specializes_the_size_it_shows():
    def returned(x):
        label = f"rows={x.shape[0]!r}, cols={x.shape[1]:03d}"
        return x.cos(), label

    def branched(x):
        if f"{x.shape[0]}" == "5":
            return x + 1
        return x - 1

    for fn in (returned, branched):
        compiled = Compiled(fn, dynamic=True)
        assert sizes_seen(compiled, fn, (5, 5, 7)) == 2, fn.__name__
        reason = compiled.compiler.records[1].recompile_reason
        assert reason.startswith("tensor 'x' size mismatch at index 0. expected 5, actual 7")


def test_an_fstring_live_across_a_graph_break_is_rebuilt_and_guarded():
    def fn(x):
        label = f"n{x.shape[0]}"
        y = x.exp()
        graph_break()
        return y, label + "!"

    compiled = Compiled(fn, dynamic=True)
    assert sizes_seen(compiled, fn, (4, 4, 6)) == 2  # the graph before the break, per size
    fn_records = [r for r in compiled.compiler.records if r.code is fn.__code__]
    assert len(fn_records) == 2  # the string made before the break pinned the size
    assert "size mismatch at index 0. expected 4, actual 6" in fn_records[1].recompile_reason
