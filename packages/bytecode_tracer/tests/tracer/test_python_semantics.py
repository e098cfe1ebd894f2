"""Python semantics the tracer must keep exactly (issue 26: each once gave a value that
differed from eager without a break): compared with eager, with graph counts."""

from __future__ import annotations

import collections

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break


def test_dict_views_follow_later_writes_to_their_dict():
    def fn(x):
        table = {"a": x, "b": x + 1}
        names, vals, pairs = table.keys(), table.values(), table.items()
        table["c"] = x * 4  # after the views were taken: they see it
        del table["a"]
        same_keys = names == {"b": 0, "c": 1}.keys()  # keys views compare as sets
        return sum(vals), "c" in names, "a" in names, len(pairs), sorted(names), same_keys, names

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    expected, got = fn(x), compiled(x)
    assert same(list(got[:6]), list(expected[:6])) and expected[5] is True
    assert type(got[6]) is type(expected[6]) and list(got[6]) == ["b", "c"]
    assert compiled.backend.graph_count == 1


def test_returned_view_is_a_view_of_the_returned_dict():
    def fn(x):
        table = {"a": x}
        vals = table.values()
        table["b"] = x + 1
        return table, vals, table

    got = Compiled(fn, fullgraph=True)(torch.randn(2))
    assert got[0] is got[2]
    got[0]["c"] = 3  # a later write shows through the returned view, as in eager
    assert list(got[1])[-1] == 3 and len(got[1]) == 3


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


class _Doubled:
    """A data descriptor: stores twice what it is given, in the instance dict."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return obj.__dict__[self.slot]

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value * 2


class _Holder:
    amount = _Doubled()

    def __init__(self, amount):
        self.amount = amount

    @property
    def negated(self):
        return -self._neg

    @negated.setter
    def negated(self, value):
        self._neg = value + 1


class _Accumulating:
    """A data descriptor with no __get__: reads find the instance dict entry it writes."""

    def __set__(self, obj, value):
        obj.__dict__["total"] = obj.__dict__.get("total", 0) + value


class _Ledger:
    total = _Accumulating()

    @property
    def fixed(self):
        return 7


def test_descriptor_writes_through_the_instance_dict_and_property_priority():
    def fn(x, ledger):
        ledger.total = 5
        ledger.total = 2
        return x + ledger.total + ledger.fixed  # the property wins over __dict__["fixed"]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.zeros(2)
    eager_ledger, traced_ledger = _Ledger(), _Ledger()
    for ledger in (eager_ledger, traced_ledger):
        ledger.__dict__.update(total=1, fixed=100)
    assert same(compiled(x, traced_ledger), fn(x, eager_ledger))
    assert vars(traced_ledger) == vars(eager_ledger) == {"total": 8, "fixed": 100}
    assert compiled.backend.graph_count == 1


def test_data_descriptor_set_and_get_run_as_in_python():
    def fn(x, holder):
        holder.amount = 10  # through _Doubled.__set__: 20
        holder.negated = 3  # through the property's setter: _neg = 4
        local = _Holder(x)  # built in the trace: __init__'s store goes through it too
        local.amount = local.amount + 1
        return x + holder.amount + holder.negated, local.amount

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    eager_holder, traced_holder = _Holder(1), _Holder(1)
    expected, got = fn(x, eager_holder), compiled(x, traced_holder)
    assert same(got, expected)
    assert vars(traced_holder) == vars(eager_holder) == {"_amount": 20, "_neg": 4}
    assert compiled.backend.graph_count == 1
    again = _Holder(5)
    assert same(compiled(x, again), fn(x, _Holder(5)))


_Pair = collections.namedtuple("_Pair", "first second")


class _TaggedPair(_Pair):
    """A namedtuple subclass without __slots__: its instances carry a __dict__."""


def test_attributes_set_on_a_namedtuple_built_in_the_trace_stay_on_it():
    def fn(x):
        pair = _TaggedPair(x, x * 2)
        pair.note = x + 3
        pair.label = "kept"
        return pair.first + pair.note, pair, pair

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    expected, got = fn(x), compiled(x)
    assert same(got[0], expected[0])
    assert type(got[1]) is _TaggedPair and same(tuple(got[1]), tuple(expected[1]))
    assert same(vars(got[1]), vars(expected[1]))
    assert got[1] is got[2]  # one object, as in eager
    assert compiled.backend.graph_count == 1


def test_namedtuple_attribute_set_across_a_break_is_kept():
    def fn(x):
        pair = _TaggedPair(x, 1)
        graph_break()  # the tracer's directive
        pair.note = x - 1
        return pair

    compiled = Compiled(fn)
    x = torch.randn(2)
    got, expected = compiled(x), fn(x)
    assert same(got.note, expected.note) and same(tuple(got), tuple(expected))
    assert compiled.breaks and compiled.backend.graph_count >= 1


def test_attribute_on_a_plain_namedtuple_raises_as_eager():
    def fn(x):
        pair = _Pair(x, 1)
        pair.note = 1  # no instance dict: AttributeError
        return pair

    with pytest.raises(AttributeError):
        fn(torch.ones(1))
    with pytest.raises(AttributeError):
        Compiled(fn)(torch.ones(1))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: isinstance(x, torch.Tensor, strict=True),
        lambda x: len([x], [x]),
        lambda x: getattr(x, "shape", None, 1),
        lambda x: callable(x, flag=True),
        lambda x: max(x.shape, ordering=1),
    ],
    ids=["isinstance_keyword", "len_two", "getattr_four", "callable_keyword", "max_keyword"],
)
def test_builtin_called_with_rejected_arguments_raises_as_eager(call):
    def fn(x):
        y = x * 2
        return y, call(x)

    with pytest.raises(TypeError):
        fn(torch.ones(2))
    with pytest.raises(TypeError):
        Compiled(fn)(torch.ones(2))


def test_rejected_builtin_call_caught_in_the_trace():
    def fn(x):
        try:
            flag = isinstance(x, torch.Tensor, strict=True)
        except TypeError:
            flag = None
        return x + 1, flag

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(2)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


class _TripleInPlace(torch.autograd.Function):
    """Triples its input in place and marks it dirty; the caller may drop the output."""

    @staticmethod
    def forward(ctx, t):
        t.mul_(3)
        ctx.mark_dirty(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


def test_function_that_mutates_its_input_in_forward_keeps_the_write():
    def fn(a):
        b = a.clone()
        before = b * 2
        _TripleInPlace.apply(b)  # the output is discarded: the write to b is what counts
        return (b * before).sum()

    compiled = Compiled(fn, fullgraph=True)
    results = []
    for run in (fn, compiled):
        a = torch.tensor([2.0, -1.0, 0.5], requires_grad=True)
        loss = run(a)
        loss.backward()
        results.append((loss.detach(), a.grad))
    assert same(results[1], results[0])
    assert compiled.backend.graph_count == 1  # the call is an in-place node of the graph


def test_python_scalar_types_as_dtype_arguments():
    def fn(x):
        flags = x.mul(2).to(bool)
        wide = torch.zeros(2, dtype=float) + x.sum()
        counts = x.new_ones(3, dtype=int)
        return flags, wide, counts, x.to(dtype=complex)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    expected, got = fn(x), compiled(x)
    assert same(got, expected)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    assert compiled.backend.graph_count == 1


def test_scalar_type_rejected_by_the_method_raises_as_eager():
    def fn(x):
        return x.type(float)

    with pytest.raises(ValueError, match="invalid type"):
        fn(torch.ones(2))
    with pytest.raises(ValueError, match="invalid type"):
        Compiled(fn)(torch.ones(2))


def test_operator_not_negates_and_bool_asks_the_value():
    import operator

    def negated(x, flag):
        return x + 1 if operator.not_(flag) else x - 1

    def truth(x, n):
        return (x * 2 if bool(n) else x), operator.truth(n)

    compiled_not, compiled_bool = Compiled(negated, fullgraph=True), Compiled(truth, fullgraph=True)
    x = torch.randn(3)
    for flag in (True, False):
        assert same(compiled_not(x, flag), negated(x, flag))
    for n in (0, 3, [], [1]):
        assert same(compiled_bool(x, n), truth(x, n))
