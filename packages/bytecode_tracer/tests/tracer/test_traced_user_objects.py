"""Objects of user classes made inside the traced code (variables/traced_objects.py): classes
with __slots__, with Python attribute hooks, classes defined in the traced frame, weak
references to such objects, and exception objects built in the trace and returned. Each
capture is one graph and matches eager, including the state of objects that escape."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.exc import Unsupported


def _one_graph(fn, *args):
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(*args)
    assert compiled.backend.graph_count == 1
    return got


# ---- __slots__ ---------------------------------------------------------------------------
class Pair:
    __slots__ = ("left", "right")

    def __init__(self, left):
        self.left = left


class PairWithExtras(Pair):  # no __slots__ of its own: instances get a __dict__ too
    def total(self):
        return self.left + self.right


def test_slots_are_read_and_written_in_the_trace():
    def fn(x):
        p = Pair(x)
        p.right = p.left * 2
        p.left = p.left + p.right
        return p.left - p.right

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_an_unset_slot_raises_attribute_error_as_in_eager():
    def fn(x):
        p = Pair(x)
        missing = not hasattr(p, "right")
        try:
            _ = p.right
        except AttributeError:
            x = x + 10
        p.right = x
        return x * missing, getattr(p, "right", None) is x

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_deleted_slot_is_unset_again():
    def fn(x):
        p = Pair(x)
        p.right = x + 1
        del p.right
        return x if hasattr(p, "right") else x - 1

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_a_returned_slotted_object_is_rebuilt_with_its_slots():
    def fn(x):
        p = PairWithExtras(x.cos())
        p.right = x + 1
        p.note = "extra"  # the subclass's instance dict
        return p, p.total()

    x = torch.randn(4)
    (got, total), (want, expected) = _one_graph(fn, x), fn(x)
    assert type(got) is PairWithExtras and same(total, expected)
    assert same(got.left, want.left) and same(got.right, want.right)
    assert got.__dict__ == {"note": "extra"}


def test_a_returned_object_keeps_an_unset_slot_unset():
    def fn(x):
        return Pair(x + 1)

    got = _one_graph(fn, torch.ones(2))
    assert same(got.left, torch.full((2,), 2.0)) and not hasattr(got, "right")


def test_setting_an_undeclared_name_on_a_slotted_object_raises_as_in_eager():
    def fn(x):
        p = Pair(x)
        p.other = 1
        return x

    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(torch.randn(2))
    with pytest.raises(AttributeError):
        Compiled(fn)(torch.randn(2))


# ---- attribute hooks ---------------------------------------------------------------------
class Store:
    """Every attribute lives in one dict; reads of missing names fall back to __getattr__."""

    def __init__(self):
        object.__setattr__(self, "store", {})

    def __setattr__(self, name, value):
        self.store[name] = value

    def __getattr__(self, name):
        try:
            return self.store[name]
        except KeyError:
            raise AttributeError(name) from None

    def __delattr__(self, name):
        del self.store[name]


class Doubling:
    """Validates on write through super().__setattr__ and keeps a log of the names set."""

    def __init__(self, scale):
        super().__setattr__("log", [])
        self.scale = scale

    def __setattr__(self, name, value):
        self.log.append(name)
        super().__setattr__(name, value * 2)

    def __delattr__(self, name):
        self.log.append("-" + name)
        object.__delattr__(self, name)


def test_user_setattr_and_getattr_run_inline():
    def fn(x):
        s = Store()
        s.y = x + 1
        s.z = s.y * 2
        return s.y + s.z, hasattr(s, "w"), "y" in s.store

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_user_delattr_runs_on_del():
    def fn(x):
        s = Store()
        s.y = x
        s.z = x + 1
        del s.y
        return s.z, hasattr(s, "y"), len(s.store)

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_super_setattr_writes_the_instance_dict_and_escapes_as_in_eager():
    def fn(x):
        d = Doubling(x)
        d.offset = x.sin()
        del d.offset
        d.shift = 3
        return d, d.scale + d.shift

    x = torch.randn(4)
    (got, value), (want, expected) = _one_graph(fn, x), fn(x)
    assert same(value, expected)
    assert type(got) is Doubling and got.log == want.log == ["scale", "offset", "-offset", "shift"]
    assert same(got.scale, want.scale) and got.shift == want.shift == 6
    assert sorted(vars(got)) == sorted(vars(want))


def test_del_attribute_of_a_plain_object_made_in_the_trace():
    class Plain:
        def __init__(self, x):
            self.a = x
            self.b = x + 1

    def fn(x):
        p = Plain(x)
        del p.a
        return p, hasattr(p, "a")

    x = torch.randn(3)
    (got, has), (want, expected) = _one_graph(fn, x), fn(x)
    assert has is expected is False and sorted(vars(got)) == ["b"] and same(got.b, want.b)


# ---- classes defined in the traced frame, weak references -------------------------------
def test_a_class_defined_in_the_frame_is_built_and_used():
    def fn(x):
        class Scaler:
            factor = 3

            def __init__(self, bias):
                self.bias = bias

            def apply(self, t, power=2):
                return t**power * self.factor + self.bias

        s = Scaler(1.5)
        return s.apply(x), type(s).__name__, isinstance(s.factor, int)

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_weak_reference_to_an_object_made_in_the_trace():
    def fn(x):
        class Node:
            pass

        n = Node()
        ref = weakref.ref(n)
        return x + (ref() is n), weakref.ref(n) is ref

    x = torch.randn(3)
    assert same(_one_graph(fn, x), fn(x))


class Holder:
    def __init__(self, value):
        self.value = value


def test_an_escaping_weak_reference_follows_its_object():
    def both(x):
        h = Holder(x + 1)
        return weakref.ref(h), h

    def ref_only(x):
        h = Holder(x + 1)
        return weakref.ref(h)

    x = torch.randn(3)
    ref, held = _one_graph(both, x)
    assert ref() is held and same(held.value, x + 1)
    ref = _one_graph(ref_only, x)
    gc.collect()
    assert ref() is None and fn_ref_is_dead_in_eager(ref_only, x)


def fn_ref_is_dead_in_eager(fn, x) -> bool:
    ref = fn(x)
    gc.collect()
    return ref() is None


def test_an_instance_of_a_frame_local_class_cannot_leave_the_trace():
    # Eager makes a new class per call: the trace's own class must not be handed out.
    def fn(x):
        class Made:
            pass

        m = Made()
        m.value = x + 1
        return m

    x = torch.randn(2)
    with pytest.raises(Unsupported, match="defined inside the traced frame"):
        Compiled(fn, fullgraph=True)(x)
    first, second = Compiled(fn)(x), Compiled(fn)(x)
    assert same(first.value, x + 1) and type(first) is not type(second)


def test_a_frame_local_class_is_no_constant():
    # Neither returned nor used as a dict key that leaves the trace: both break.
    def returned(x):
        class Kind:
            pass

        return x + 1, Kind()

    def keyed(x):
        class Kind:
            pass

        return x + 1, {type(Kind()): 1}

    x = torch.randn(2)
    for fn in (returned, keyed):
        with pytest.raises(Unsupported, match="defined inside the traced frame"):
            Compiled(fn, fullgraph=True)(x)
        (y, made), (_, other) = Compiled(fn)(x), Compiled(fn)(x)
        assert same(y, x + 1) and made is not other


def test_a_frame_local_method_closing_over_locals_is_a_clean_break():
    def fn(x):
        scale = 2

        class Closing:
            def get(self):
                return scale

        return x * Closing().get()

    x = torch.randn(2)
    with pytest.raises(Unsupported, match="closes over"):
        Compiled(fn, fullgraph=True)(x)
    assert same(Compiled(fn)(x), x * 2)


# ---- exception objects -------------------------------------------------------------------
def test_a_returned_exception_object_is_rebuilt_with_its_args():
    def fn(x):
        return ValueError("bad", 2), x + 1

    x = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    (exc, y), (want, expected) = compiled(x), fn(x)
    assert compiled.backend.graph_count == 1 and same(y, expected)
    assert type(exc) is ValueError and exc.args == want.args and exc.__traceback__ is None
    again, _ = compiled(x)
    assert again is not exc  # a new object per call, as eager makes


def test_a_caught_exception_leaving_the_trace_keeps_eager_behaviour():
    def fn(x):
        try:
            raise KeyError("k")
        except KeyError as e:
            caught = e
        return caught, x + 1

    x = torch.randn(3)
    exc, y = Compiled(fn)(x)
    assert type(exc) is KeyError and exc.args == ("k",) and same(y, x + 1)
