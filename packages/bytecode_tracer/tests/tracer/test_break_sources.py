"""The break sources the issue lists, and breaks where the frame must fall back to eager."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

from conftest import Compiled, same

x = torch.randn(4)
log = logging.getLogger("ember.test.user")


def test_logging_call_runs_and_results_match(caplog):
    def fn(a):
        b = a.cos()
        log.warning("value %s", 3)
        return b + 1

    compiled = Compiled(fn)
    with caplog.at_level(logging.WARNING, logger="ember.test.user"):
        assert same(compiled(x), fn(x))
    assert sum("value 3" in r.getMessage() for r in caplog.records) == 2  # eager + compiled


def test_numpy_call_breaks():
    def fn(a):
        b = a * 2
        total = np.sum(b.detach().numpy())
        return b + float(total)

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert compiled.breaks


def test_tolist_breaks():
    def fn(a):
        values = a.tolist()
        return a * len(values)

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert any("tolist" in b.reason for b in compiled.breaks)


@pytest.mark.parametrize("where", ["loop", "try", "with"])
def test_break_inside_loop_try_or_with_falls_back_correctly(where, capsys):
    def in_loop(a):
        for i in range(3):
            a = a + i
            print("step", i)
        return a

    def in_try(a):
        try:
            a = a * 2
            print("in try")
        except ValueError:
            a = a - 100
        return a + 1

    def in_with(a):
        with torch.no_grad():
            b = a * 2
            print("in with")
        return b + 1

    fn = {"loop": in_loop, "try": in_try, "with": in_with}[where]
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    out = capsys.readouterr().out
    assert out.count("step 2" if where == "loop" else f"in {where}") == 2
    if where == "loop":
        assert any("live" in r for _, r in compiled.compiler.skipped)
    else:  # the break runs under the block's exception table; the rest is a resume function
        assert compiled.breaks and compiled.backend.graph_count >= 1


def test_attribute_write_on_a_module_is_replayed():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.calls = 0
            self.last = None

        def forward(self, a):
            self.calls = self.calls + 1
            out = self.lin(a)
            self.last = out.detach()
            return out

    model = Counter()
    compiled = Compiled(model)
    out = compiled(x)
    assert model.calls == 1 and same(model.last, out.detach())
    compiled(x)
    assert model.calls == 2


def test_runtime_error_inside_try_runs_the_handler():
    def fn(ids, table):
        try:
            return table[ids] * 2  # out-of-range ids only fail at run time
        except IndexError:
            return torch.zeros(1)

    table = torch.randn(5)
    compiled = Compiled(fn)
    assert same(compiled(torch.tensor([1, 2]), table), fn(torch.tensor([1, 2]), table))
    assert same(compiled(torch.tensor([7]), table), torch.zeros(1))


def test_runtime_error_inside_no_grad_restores_grad_mode():
    def fn(ids, table):
        with torch.no_grad():
            return table[ids] * 2

    table = torch.randn(5)
    compiled = Compiled(fn)
    compiled(torch.tensor([1]), table)
    with pytest.raises(IndexError):
        compiled(torch.tensor([9]), table)
    assert torch.is_grad_enabled()


def test_except_keyerror_from_a_dict_lookup_is_followed():
    def lookup(table, key, default):
        try:
            return table[key]
        except KeyError:
            return default

    def fn(a, table):
        return a * lookup(table, "missing", 3.0) + lookup(table, "scale", 0.0)

    compiled = Compiled(fn)
    table = {"scale": 2.0}
    assert same(compiled(x, table), fn(x, table))
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    table["missing"] = 5.0  # the missing key is guarded: now it is found
    assert same(compiled(x, table), fn(x, table))


def test_uncaught_trace_time_exception_breaks_and_raises_like_eager():
    def fn(a, table):
        b = a + 1
        return b * table["nope"]

    with pytest.raises(KeyError, match="nope"):
        Compiled(fn)(x, {"yes": 1})


def test_index_error_caught_and_other_exceptions_not():
    def fn(a, items):
        try:
            extra = items[5]
        except IndexError:
            extra = 0
        try:
            other = items[0]
        except (KeyError, TypeError):
            other = -1
        return a + extra + other

    compiled = Compiled(fn)
    assert same(compiled(x, [1, 2]), fn(x, [1, 2]))
    assert compiled.backend.graph_count == 1
