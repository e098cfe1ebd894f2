"""A list, tuple or dict argument is guarded by its length (or keys) at once, and each
plain-constant entry by value only once the trace reads it (variables/lazy.py): an entry
the function never looks at may change without a retrace, one it read may not, and any
whole read (iteration, equality, a mutation) guards every entry. Backend eager here;
integration_tests/test_guard_precision_inductor.py runs the same under inductor."""

from __future__ import annotations

import torch

from conftest import Compiled, same


def scale_by_entry(x, table):
    return x.cos() * table[1]


def run(compiled, fn, *args):
    got = compiled(*args)
    assert same(got, fn(*args))
    return compiled.backend.graph_count


def test_an_unread_dict_value_may_change_without_a_retrace():
    compiled = Compiled(scale_by_entry)
    x = torch.randn(4)
    assert run(compiled, scale_by_entry, x, {1: 2.0, 2: 5}) == 1
    assert run(compiled, scale_by_entry, x, {1: 2.0, 2: "other"}) == 1  # d[2] unread
    assert run(compiled, scale_by_entry, x, {1: 3.0, 2: 5}) == 2  # d[1] was read: retrace
    assert run(compiled, scale_by_entry, x, {1: 2.0, 3: 5}) == 3  # another key set


def test_an_unread_tuple_or_list_item_may_change_without_a_retrace():
    x = torch.randn(4)
    for make in (tuple, list):
        compiled = Compiled(scale_by_entry)
        assert run(compiled, scale_by_entry, x, make((1, 2, 3))) == 1
        assert run(compiled, scale_by_entry, x, make((10, 2, 30))) == 1
        assert run(compiled, scale_by_entry, x, make((1, 4, 3))) == 2  # item 1 was read
        assert run(compiled, scale_by_entry, x, make((1, 2))) == 3  # another length


def test_whole_reads_guard_every_entry():
    def total(x, values):
        return x * sum(values)

    def compare(x, pair):
        return x + 1 if pair == (1, 2) else x - 1

    def keyed(x, d):
        return x * len([k for k, v in d.items() if v > 0])

    x = torch.randn(3)
    cases = [
        (total, ((1, 2, 3), (1, 2, 4))),
        (total, ([1.0, 2.0], [1.0, 5.0])),
        (compare, ((1, 2), (1, 3))),
        (keyed, ({"a": 1, "b": -1}, {"a": 1, "b": 1})),
    ]
    for fn, (first, changed) in cases:
        compiled = Compiled(fn)
        assert run(compiled, fn, x, first) == 1
        assert run(compiled, fn, x, changed) == 2, fn.__name__


def test_get_and_nested_reads_guard_what_they_read():
    def fn(x, cfg):
        inner = cfg.get("sizes")
        return x * inner[0] + cfg.get("missing", 1.5)

    compiled = Compiled(fn)
    x = torch.randn(5)
    assert run(compiled, fn, x, {"sizes": [2, 7], "name": "a"}) == 1
    assert run(compiled, fn, x, {"sizes": [2, 9], "name": "b"}) == 1  # unread entries
    assert run(compiled, fn, x, {"sizes": [3, 7], "name": "a"}) == 2


def test_a_mutated_argument_guards_every_entry_and_writes_back():
    def fn(x, d):
        d["seen"] = d["count"] + 1
        return x + d["count"]

    compiled = Compiled(fn)
    x = torch.randn(2)
    d1, d2 = {"count": 1, "seen": 0}, {"count": 1, "seen": 0}
    assert same(compiled(x, d1), fn(x, d2)) and d1 == d2
    d3, d4 = {"count": 4, "seen": 0}, {"count": 4, "seen": 0}
    assert same(compiled(x, d3), fn(x, d4)) and d3 == d4
    assert compiled.backend.graph_count == 2
