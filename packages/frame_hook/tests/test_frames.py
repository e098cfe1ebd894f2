"""The substitute sees the frame's arguments, defaults, cells and free variables intact."""

from __future__ import annotations

import ember_frame_hook as fh
from conftest import Recorder, substitute_for


def run_substituted(fn, replacement, *args, **kwargs):
    fh.reset()
    rec = Recorder({fn.__code__: substitute_for(fn, replacement)})
    with fh.eval_frame(rec):
        first = fn(*args, **kwargs)
        second = fn(*args, **kwargs)  # cache hit
    assert len(rec.calls) == 1
    assert first == second
    return first, rec.calls[0][1]


def test_defaults_varargs_kwargs_kwonly_posonly():
    def f(a, b=10, /, c=20, *rest, d, e=30, **extra):
        return None

    def g(a, b=10, /, c=20, *rest, d, e=30, **extra):
        return ("g", a, b, c, rest, d, e, extra)

    result, f_locals = run_substituted(f, g, 1, 2, 3, 4, 5, d=6, z=7)
    assert result == ("g", 1, 2, 3, (4, 5), 6, 30, {"z": 7})
    assert f_locals == {"a": 1, "b": 2, "c": 3, "rest": (4, 5), "d": 6, "e": 30, "extra": {"z": 7}}
    result, _ = run_substituted(f, g, 1, d=2)
    assert result == ("g", 1, 10, 20, (), 2, 30, {})


def make_closure(k):
    counter = [0]

    def f(x):
        counter[0] += 0
        return x + k

    def g(x):
        counter[0] += 1
        return ("g", x * k, counter[0])

    return f, g


def test_free_variables_come_from_the_original_closure():
    f, g = make_closure(5)
    g_code = g.__code__.replace(co_name="f")
    assert g_code.co_freevars == f.__code__.co_freevars
    rec = Recorder({f.__code__: g_code})
    with fh.eval_frame(rec):
        assert f(2) == ("g", 10, 1)
        assert f(3) == ("g", 15, 2)
    f_locals = rec.calls[0][1]
    assert f_locals["x"] == 2 and f_locals["k"] == 5 and f_locals["counter"] == [2]


def test_closure_identity_per_function_object_sharing_a_code():
    f5, g5 = make_closure(5)
    f7, _ = make_closure(7)
    assert f5.__code__ is f7.__code__
    g_code = g5.__code__.replace(co_name="f")
    rec = Recorder({f5.__code__: g_code}, guard=lambda loc: loc["k"] == 5)
    with fh.eval_frame(rec):
        assert f5(1) == ("g", 5, 1)
        assert f7(1) == ("g", 7, 1), "guard on k fails: callback compiles again"
        assert f5(2) == ("g", 10, 2)
    assert len(rec.calls) == 2


def test_argument_that_is_a_cell():
    def f(x):
        def inner():
            return x

        return inner

    def g(x):
        def inner():
            return ("g", x)

        x = x + 1
        return inner

    rec = Recorder({f.__code__: g.__code__.replace(co_name="f")})
    with fh.eval_frame(rec):
        assert f(1)() == ("g", 2)
        assert f(10)() == ("g", 11)
    assert rec.calls[0][1] == {"x": 1}


def test_methods_and_super():
    class Base:
        def val(self, x):
            return x

    class Child(Base):
        def val(self, x):
            return super().val(x) + 1

        def val_sub(self, x):
            return ("sub", super().val(x) * 2)

    sub_code = Child.val_sub.__code__.replace(co_name="val", co_qualname="Child.val")
    rec = Recorder({Child.val.__code__: sub_code})
    with fh.eval_frame(rec):
        assert Child().val(4) == ("sub", 8)
        assert Child().val(5) == ("sub", 10)


def test_lambda_and_nested_calls_go_through_the_hook():
    def leaf(x):
        return x + 1

    def leaf_sub(x):
        return x + 100

    def outer(x):
        return leaf(x) * 2

    rec = Recorder({leaf.__code__: substitute_for(leaf, leaf_sub)})
    with fh.eval_frame(rec):
        assert outer(1) == 202
        assert list(map(lambda v: leaf(v), [1, 2])) == [101, 102]


def test_f_locals_snapshot_outlives_the_callback():
    frames = []

    def f(x, y):
        return x - y

    def callback(frame, cache):
        if frame.f_code is f.__code__:
            frames.append(frame)
        return None

    with fh.eval_frame(callback):
        f(5, 3)
    [frame] = frames
    assert frame.f_locals == {"x": 5, "y": 3}
    assert frame.f_globals is globals() and frame.f_func is f
    assert frame.f_builtins["len"] is len and frame.closure is None
    assert "f" in repr(frame)
