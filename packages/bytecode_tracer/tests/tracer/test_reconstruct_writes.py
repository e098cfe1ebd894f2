"""Writes to objects that existed before the frame (reconstruct.py): every value is read as
the frame saw it before any container, attribute or global is written, and each write is
applied once per call (fuzz 2026:142, 2026:174, 2026:289: a list mutated in place and
returned came back with its new items read from its already-rewritten self)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


def _converted(compiled: Compiled, fn) -> bool:
    """The frame ran rewritten (its writes replayed by the runner), not skipped."""
    return any(r.code is fn.__code__ and r.new_code is not None for r in compiled.compiler.records)


def _brk(x):
    x.tolist()  # a graph break


def _insert_front(x, L):
    L.insert(0, 5.0)
    return L


def _insert_front_not_returned(x, L):
    L.insert(0, 5.0)
    return x + 1


def _pop_front(x, L):
    first = L.pop(0)
    return first * 2, L


def _setitem_reads_old(x, L):
    old = L[0]
    L[0] = x * 3
    L.append(old)
    return L, old


def _reverse(x, L):
    L.reverse()
    return x.sum(), L


def _sort_by_key(x, L):
    L.append(x)
    L.sort(key=lambda t: t.dim())
    return L


def _insert_then_break(x, L):
    L.insert(0, x * 2)
    _brk(x)
    return L[1] + 1, L


def _break_then_insert(x, L):
    y = x * 2
    _brk(x)
    L.insert(0, y)
    return L


def _insert_front_with_break_before_return(x, L):
    first = L[0]
    L.insert(0, 7.0)
    _brk(x)
    return L, first


def _nested_lists(x, L):
    inner = L[0]
    inner.insert(0, x)
    L.insert(0, inner[1])
    return L


LIST_CASES = [
    _insert_front,
    _insert_front_not_returned,
    _pop_front,
    _setitem_reads_old,
    _reverse,
    _sort_by_key,
    _insert_then_break,
    _break_then_insert,
    _insert_front_with_break_before_return,
]


def _list_args():
    x = torch.arange(4.0)
    return x, [x + 1, torch.ones(2, 2), x.sum()]


@pytest.mark.parametrize("fn", LIST_CASES, ids=lambda f: f.__name__)
def test_mutated_list_is_rebuilt_from_values_read_before_the_write(fn):
    compiled = Compiled(fn)
    for _ in range(2):  # the trace, then the cached code
        want_args, got_args = _list_args(), _list_args()
        want = fn(*want_args)
        got = compiled(*got_args)
        assert same(got, want)
        assert same(got_args, want_args)
        if isinstance(want, tuple) and isinstance(want[-1], list):
            assert got[-1] is got_args[1]  # the caller's own list, not a copy
    assert _converted(compiled, fn)


def test_nested_mutated_lists_read_their_old_items():
    def args():
        x = torch.arange(3.0)
        return x, [[x + 1, x + 2], x * 5]

    compiled = Compiled(_nested_lists)
    for _ in range(2):
        want_args, got_args = args(), args()
        want = _nested_lists(*want_args)
        got = compiled(*got_args)
        assert same(got, want) and same(got_args, want_args)
        assert got is got_args[1] and got[0] is got_args[1][1][1]
    assert _converted(compiled, _nested_lists)


def _dict_swap(x, d):
    a = d["a"]
    d["a"] = d["b"] * 2
    d["b"] = a
    return d


def _dict_pop_returned_value(x, d):
    b = d.pop("b")
    d["c"] = x + 1
    return b, d


def _dict_update_not_returned(x, d):
    d.update(a=x, b=d["a"])
    return x * 2


def _dict_setitem_through_break(x, d):
    old = d["a"]
    d["a"] = x * 4
    _brk(x)
    return d, old


@pytest.mark.parametrize(
    "fn",
    [_dict_swap, _dict_pop_returned_value, _dict_update_not_returned, _dict_setitem_through_break],
    ids=lambda f: f.__name__,
)
def test_mutated_dict_is_rebuilt_from_values_read_before_the_write(fn):
    def args():
        x = torch.arange(4.0)
        return x, {"a": x + 1, "b": x - 1}

    compiled = Compiled(fn)
    for _ in range(2):
        want_args, got_args = args(), args()
        want = fn(*want_args)
        got = compiled(*got_args)
        assert same(got, want) and same(got_args, want_args)
    assert _converted(compiled, fn)


class _Box:
    pass


def test_attribute_and_global_written_from_an_item_of_a_list_mutated_later():
    def fn(x, L, box):
        global _WRITTEN
        box.first = L[0]
        _WRITTEN = L[1]
        L.reverse()
        return x + 1

    def args():
        x = torch.arange(3.0)
        return x, [x + 1, x + 2], _Box()

    compiled = Compiled(fn)
    for _ in range(2):
        want_args = args()
        fn(*want_args)
        want_global = _WRITTEN
        got_args = args()
        compiled(*got_args)
        assert same(got_args[2].first, want_args[2].first)
        assert same(_WRITTEN, want_global)
        assert same(got_args[1], want_args[1])
    assert compiled.backend.graph_count == 1


def test_attribute_write_targets_the_object_the_frame_saw_before_the_list_changed():
    def fn(x, L):
        L[0].value = x * 2
        L.insert(0, _Box())
        return L

    def args():
        return torch.arange(3.0), [_Box()]

    compiled = Compiled(fn)
    for _ in range(2):
        x, L = args()
        box = L[0]
        got = compiled(x, L)
        assert got is L and len(L) == 2 and L[1] is box
        assert same(box.value, x * 2) and not hasattr(L[0], "value")


_WRITTEN = None
