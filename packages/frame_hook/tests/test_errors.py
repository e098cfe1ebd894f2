"""Exceptions, tracebacks and bad input: clear errors, never a crash."""

from __future__ import annotations

import sys
import traceback

import pytest

import ember_frame_hook as fh
from conftest import Recorder, substitute_for

BOOM = ValueError("boom")


def target(x):
    return x


def raising(x):
    x = x + 1
    raise BOOM  # the substitute's own line


def test_exception_from_substitute_propagates_unchanged_with_traceback():
    code = substitute_for(target, raising)
    rec = Recorder({target.__code__: code})
    for _ in range(2):  # miss, then hit
        with fh.eval_frame(rec), pytest.raises(ValueError) as info:
            target(1)
        assert info.value is BOOM
        frames = traceback.extract_tb(info.value.__traceback__)
        assert frames[-1].name == "target"
        assert frames[-1].lineno == raising.__code__.co_firstlineno + 2
        assert frames[-1].line == "raise BOOM  # the substitute's own line"
        assert info.value.__traceback__.tb_next.tb_frame.f_code is code
        BOOM.__traceback__ = None


def test_exception_from_original_code_under_hook():
    def bad(x):
        return 1 / x

    with fh.eval_frame(lambda frame, cache: None), pytest.raises(ZeroDivisionError) as info:
        bad(0)
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "bad"


def test_callback_exception_propagates_and_hook_keeps_working():
    def callback(frame, cache):
        if frame.f_code is target.__code__:
            raise KeyError("from callback")
        return None

    with fh.eval_frame(callback):
        with pytest.raises(KeyError, match="from callback") as info:
            target(1)
        assert all(f.name != "target" for f in traceback.extract_tb(info.value.__traceback__))
        assert fh.get_eval_frame() is callback
    assert target(2) == 2


def test_guard_that_raises_gives_guard_error():
    def guard(f_locals):
        raise ZeroDivisionError("bad guard")

    rec = Recorder({target.__code__: substitute_for(target, raising)}, guard=guard)
    with fh.eval_frame(rec):
        with pytest.raises(ValueError):
            target(1)  # miss: callback's entry runs without its guard
        BOOM.__traceback__ = None
        with pytest.raises(fh.GuardError, match="target") as info:
            target(1)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert target(3) == 3


def test_guard_returning_non_bool_uses_truthiness():
    rec = Recorder({target.__code__: substitute_for(target, lambda x: ("sub", x))})
    rec.guard = lambda f_locals: [] if f_locals["x"] == 0 else [1]
    with fh.eval_frame(rec):
        assert target(1) == ("sub", 1)
        assert target(1) == ("sub", 1)
        assert target(0) == ("sub", 0)
    assert len(rec.calls) == 2


@pytest.mark.parametrize("bad", [42, "callback", True, object()])
def test_set_eval_frame_rejects_non_callables(bad):
    with pytest.raises(TypeError, match="callable"):
        fh.set_eval_frame(bad)
    assert fh.get_eval_frame() is None


@pytest.mark.parametrize("bad", [42, "x", (1, 2), target])
def test_callback_returning_wrong_type_is_type_error(bad):
    def callback(frame, cache):
        return bad if frame.f_code is target.__code__ else None

    with fh.eval_frame(callback), pytest.raises(TypeError, match="GuardedCode or None"):
        target(1)
    assert fh.cache_entries(target.__code__) == []


def test_incompatible_substitute_is_type_error():
    def two_args(x, y):
        return x

    def renamed(z):
        return z

    def closure_user():
        k = 1

        def inner(x):
            return x + k

        return inner

    for other, reason in [
        (two_args, "signature"),
        (renamed, "argument names"),
        (closure_user(), "free variables"),
    ]:
        rec = Recorder({target.__code__: other.__code__})
        with fh.eval_frame(rec), pytest.raises(TypeError, match=reason):
            target(1)
    assert target(5) == 5


def test_guarded_code_validates_its_arguments():
    with pytest.raises(TypeError, match="code object"):
        fh.GuardedCode(target, lambda f: True)
    with pytest.raises(TypeError, match="callable"):
        fh.GuardedCode(target.__code__, 3)

    def gen():
        yield 1

    with pytest.raises(TypeError, match="generator"):
        fh.GuardedCode(gen.__code__, lambda f: True)
    module_code = compile("x = 1", "<m>", "exec")
    with pytest.raises(TypeError, match="plain function"):
        fh.GuardedCode(module_code, lambda f: True)


def test_other_functions_validate_arguments():
    for fn in (fh.skip_code, fh.cache_entries, fh.is_skipped):
        with pytest.raises(TypeError, match="code object"):
            fn(target)
    with pytest.raises(TypeError):
        fh.set_cache_limit("8")
    with pytest.raises(ValueError, match="between"):
        fh.set_cache_limit(0)
    entry = fh.GuardedCode(target.__code__, lambda f: True)
    with pytest.raises(TypeError, match="code object"):
        fh.cache_insert(target, entry)
    with pytest.raises(TypeError, match="GuardedCode"):
        fh.cache_insert(target.__code__, target.__code__)
    with pytest.raises(TypeError, match="2 arguments"):
        fh.cache_insert(target.__code__)

    def two_args(x, y):
        return x

    with pytest.raises(TypeError, match="signature"):
        fh.cache_insert(target.__code__, fh.GuardedCode(two_args.__code__, lambda f: True))
    assert fh.cache_entries(target.__code__) == []


def test_guarded_code_subclass_and_attributes():
    class Described(fh.GuardedCode):
        pass

    entry = Described(target.__code__, lambda f: True)
    entry.description = "x is int"
    assert entry.description == "x is int" and entry.hits == 0
    assert "target" in repr(entry)
    with fh.eval_frame(lambda frame, cache: entry if frame.f_code is target.__code__ else None):
        assert target(4) == 4
    assert fh.cache_entries(target.__code__) == [entry]


def deep(n):
    return n


def deep_sub(n):
    return deep(n + 1)


def test_recursion_error_inside_substitute():
    rec = Recorder({deep.__code__: substitute_for(deep, deep_sub)})
    with fh.eval_frame(rec), pytest.raises(RecursionError):
        deep(0)
    assert sys.getrecursionlimit() > 0 and deep(1) == 1
