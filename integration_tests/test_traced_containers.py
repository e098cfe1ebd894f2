"""Containers made in the traced code under the default backend (issue 26): the inductor
twins of packages/bytecode_tracer/tests/tracer/test_traced_containers.py, each compiled with
fullgraph=True, compared with eager and checked to have run one compiled graph."""

from __future__ import annotations

import collections

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _one_compiled_graph(fn, *args):
    got = ember.compile(fn, fullgraph=True)(*args)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    return got


def test_sets_under_inductor():
    def fn(x):
        s = set()
        s.add(3)
        s |= {1, 2}
        s -= {2}
        names = frozenset(["b", "a"]) | {"c"}
        return x * len(s) + sum(s), 2 in s, sorted(names), s

    x = torch.randn(4)
    got, want = _one_compiled_graph(fn, x), fn(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:3] == want[1:3] and list(got[3]) == list(want[3])


class _Bag(list):
    def total(self):
        return sum(self)


class _Table(dict):
    def put(self, key, value):
        self[key] = value


def test_list_and_dict_subclasses_under_inductor():
    def fn(x):
        bag = _Bag([x])
        bag.append(x.cos())
        bag.name = "bag"
        table = _Table(a=x)
        table.put("b", x.sin())
        return bag.total() + table["a"] * table["b"], bag, table

    x = torch.randn(4)
    got, want = _one_compiled_graph(fn, x), fn(x)
    torch.testing.assert_close(got[0], want[0])
    assert type(got[1]) is _Bag and got[1].name == "bag" and type(got[2]) is _Table
    torch.testing.assert_close(list(got[1]), list(want[1]))
    torch.testing.assert_close(dict(got[2]), dict(want[2]))


_Pair = collections.namedtuple("_Pair", "a b")


def test_namedtuple_helpers_under_inductor():
    def fn(x):
        p = _Pair._make([x, 2])._replace(b=3)
        return p.a * p.b, p._asdict(), _Pair._fields

    x = torch.randn(4)
    got, want = _one_compiled_graph(fn, x), fn(x)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    assert got[2] == want[2]


def test_list_subclass_input_mutated_under_inductor():
    def fn(x, bag):
        bag.append(x.exp())
        return bag.total() * len(bag)

    x = torch.randn(4)
    mine, theirs = _Bag([x]), _Bag([x])
    torch.testing.assert_close(_one_compiled_graph(fn, x, mine), fn(x, theirs))
    assert type(mine) is _Bag and len(mine) == 2
    torch.testing.assert_close(list(mine), list(theirs))
