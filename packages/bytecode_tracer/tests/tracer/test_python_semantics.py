"""Python semantics the tracer must keep exactly (issue 26: each once gave a value that
differed from eager without a break): compared with eager, with graph counts."""

from __future__ import annotations

import torch

from conftest import Compiled, same


def test_dict_views_follow_later_writes_to_their_dict():
    def fn(x):
        table = {"a": x, "b": x + 1}
        names, vals, pairs = table.keys(), table.values(), table.items()
        table["c"] = x * 4  # after the views were taken: they see it
        del table["a"]
        return sum(vals), "c" in names, "a" in names, len(pairs), sorted(names), names

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    expected, got = fn(x), compiled(x)
    assert same(list(got[:5]), list(expected[:5]))
    assert type(got[5]) is type(expected[5]) and list(got[5]) == ["b", "c"]
    assert compiled.backend.graph_count == 1


def test_view_of_an_argument_dict_sees_the_traced_write():
    def fn(x, table):
        vals = table.values()
        table["new"] = x * 2
        return x + len(vals), list(vals)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(2)
    eager_table, traced_table = {"k": 1}, {"k": 1}
    expected, got = fn(x, eager_table), compiled(x, traced_table)
    assert same(got, expected)
    assert same(traced_table, eager_table)
    assert compiled.backend.graph_count == 1
