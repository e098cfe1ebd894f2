"""Substitution, guards, recompilation, MRU order, the cache limit, run-only mode, skip."""

from __future__ import annotations

import math

import ember_frame_hook as fh
from conftest import Recorder, substitute_for


def orig(x, y=2):
    return ("orig", x + y)


def sub(x, y=2):
    return ("sub", x * y)


def test_hook_off_runs_original():
    assert orig(3) == ("orig", 5)
    assert fh.get_eval_frame() is None
    assert fh.cache_entries(orig.__code__) == []


def test_substitute_runs_and_is_cached():
    code = substitute_for(orig, sub)
    rec = Recorder({orig.__code__: code})
    with fh.eval_frame(rec):
        assert orig(3) == ("sub", 6)
        assert orig(4, y=5) == ("sub", 20)
    assert len(rec.calls) == 1, "second call must hit the cache"
    [entry] = fh.cache_entries(orig.__code__)
    assert entry.code is code and entry.hits == 1
    assert fh.stats()["hits"] == 1
    assert orig(3) == ("orig", 5), "hook off again: original code"


def test_callback_sees_arguments_and_an_empty_cache():
    rec = Recorder({orig.__code__: substitute_for(orig, sub)})
    with fh.eval_frame(rec):
        orig(7)
    name, f_locals, cache = rec.calls[0]
    assert name == "orig" and f_locals == {"x": 7, "y": 2}
    assert cache.entries == () and not cache.full and cache.limit == 8
    assert cache.code is orig.__code__


def test_guard_failure_recompiles_and_keeps_both_entries():
    def type_guard(kind):
        return lambda f_locals: type(f_locals["x"]) is kind

    calls = []

    def callback(frame, cache):
        if frame.f_code is not orig.__code__:
            return None
        calls.append(type(frame.f_locals["x"]))
        return fh.GuardedCode(substitute_for(orig, sub), type_guard(type(frame.f_locals["x"])))

    with fh.eval_frame(callback):
        assert orig(2) == ("sub", 4)
        assert orig(2.0) == ("sub", 4.0)
        assert orig(3) == ("sub", 6)
        assert orig(3.0) == ("sub", 6.0)
    assert calls == [int, float]
    entries = fh.cache_entries(orig.__code__)
    assert [e.hits for e in entries] == [1, 1]
    # Most recently used first: the float entry ran last.
    assert entries[0].guard({"x": 1.0}) and not entries[0].guard({"x": 1})


def test_most_recently_used_entry_moves_to_front():
    entries = [
        fh.GuardedCode(substitute_for(orig, sub), lambda f, v=v: f["x"] == v) for v in (1, 2, 3)
    ]
    pending = list(entries)

    def callback(frame, cache):
        return pending.pop(0) if frame.f_code is orig.__code__ else None

    with fh.eval_frame(callback):
        for v in (1, 2, 3):
            orig(v)
        assert fh.cache_entries(orig.__code__) == entries[::-1]
        orig(1)
        assert fh.cache_entries(orig.__code__) == [entries[0], entries[2], entries[1]]


def test_limit_reached_is_told_and_lru_is_evicted():
    fh.set_cache_limit(2)
    seen_full = []

    def callback(frame, cache):
        if frame.f_code is not orig.__code__:
            return None
        seen_full.append(cache.full)
        x = frame.f_locals["x"]
        return fh.GuardedCode(substitute_for(orig, sub), lambda f: f["x"] == x)

    with fh.eval_frame(callback):
        for x in (1, 2, 3, 4):
            assert orig(x) == ("sub", 2 * x)
    assert seen_full == [False, False, True, True]
    kept = fh.cache_entries(orig.__code__)
    assert len(kept) == 2
    assert kept[0].guard({"x": 4}) and kept[1].guard({"x": 3})


def test_callback_policy_on_full_cache_can_give_up():
    fh.set_cache_limit(1)

    def callback(frame, cache):
        if frame.f_code is not orig.__code__:
            return None
        if cache.full:
            fh.skip_code(frame.f_code)
            return None
        return fh.GuardedCode(substitute_for(orig, sub), lambda f: f["x"] == 1)

    with fh.eval_frame(callback):
        assert orig(1) == ("sub", 2)
        assert orig(5) == ("orig", 7)
        assert orig(1) == ("orig", 3), "skipped: not even the cached entry runs"
    assert fh.is_skipped(orig.__code__)


def test_run_only_mode_uses_cache_and_never_calls_back():
    rec = Recorder({orig.__code__: substitute_for(orig, sub)}, guard=lambda f: f["x"] > 0)
    with fh.eval_frame(rec):
        orig(1)
    assert len(rec.calls) == 1
    with fh.eval_frame(False):
        assert fh.get_eval_frame() is False
        assert orig(5) == ("sub", 10)
        assert orig(-1) == ("orig", 1), "guard fails: original runs, no callback"
    assert len(rec.calls) == 1


def test_callback_returning_none_runs_original_and_asks_again():
    asked = []

    def callback(frame, cache):
        if frame.f_code is orig.__code__:
            asked.append(1)
        return None

    with fh.eval_frame(callback):
        assert orig(1) == ("orig", 3)
        assert orig(1) == ("orig", 3)
    assert len(asked) == 2


def test_skip_code_never_calls_back():
    fh.skip_code(orig.__code__)
    rec = Recorder({orig.__code__: substitute_for(orig, sub)})
    with fh.eval_frame(rec):
        assert orig(1) == ("orig", 3)
    assert rec.calls == []
    fh.reset()
    assert not fh.is_skipped(orig.__code__)


def test_reset_drops_entries():
    rec = Recorder({orig.__code__: substitute_for(orig, sub)})
    with fh.eval_frame(rec):
        orig(1)
        fh.reset()
        orig(1)
    assert len(rec.calls) == 2


def test_set_eval_frame_returns_previous_setting():
    def cb(frame, cache):
        return None

    assert fh.set_eval_frame(cb) is None
    assert fh.set_eval_frame(False) is cb
    assert fh.set_eval_frame(None) is False


def test_substitute_with_more_locals_and_deeper_stack():
    def small(a, b):
        return a + b

    def big(a, b):
        t0, t1, t2, t3, t4, t5, t6, t7 = (a,) * 8
        t8 = [[[[[[[[a, b], a], b], a], b], a], b], t0 + t1 + t2 + t3 + t4 + t5 + t6 + t7]
        return ("big", t8[1], len(str(t8[0])))

    code = substitute_for(small, big)
    rec = Recorder({small.__code__: code})
    with fh.eval_frame(rec):
        for _ in range(3):
            assert small(1, 2) == ("big", 8, len(str([[[[[[[1, 2], 1], 2], 1], 2], 1], 2])))


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def fact_big(n):
    pad = [0] * 3
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = n
    del a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, pad
    return ("big", 1) if n <= 1 else ("big", n * fact(n - 1)[1])


def test_deep_recursion_with_a_larger_substitute_frame():
    """Frames at every depth (so at chunk ends of the frame stack) run the substitute."""
    code = fact_big.__code__.replace(co_name="fact")
    rec = Recorder({fact.__code__: code})
    with fh.eval_frame(rec):
        for n in (5, 300, 600):
            assert fact(n) == ("big", math.factorial(n)), "every level must run the substitute"
    stats = fh.stats()
    assert stats["hits"] > 600
    # Some frames sat at the end of a frame-stack chunk: they ran relocated, not original.
    assert stats["relocated"] > 0


def test_cache_insert_caches_an_entry_before_any_call():
    entry = fh.GuardedCode(substitute_for(orig, sub), lambda f_locals: True)
    assert fh.cache_insert(orig.__code__, entry) is None
    assert fh.cache_entries(orig.__code__) == [entry]
    with fh.eval_frame(Recorder()):  # a hit: the callback is never asked
        assert orig(3) == ("sub", 6)
    assert entry.hits == 1


def test_an_entry_cached_twice_keeps_one_slot_and_moves_to_front():
    """A callback that cached its entry itself (cache_insert, under its own lock) and returns
    it: the hook's insert of the returned entry moves it to the front, no second slot."""
    newer = fh.GuardedCode(substitute_for(orig, sub), lambda f_locals: f_locals["x"] > 100)
    older = fh.GuardedCode(substitute_for(orig, sub), lambda f_locals: True)

    def callback(frame, cache):
        if frame.f_code is not orig.__code__:
            return None
        fh.cache_insert(orig.__code__, older)
        fh.cache_insert(orig.__code__, newer)
        return older

    with fh.eval_frame(callback):
        assert orig(3) == ("sub", 6)
    assert fh.cache_entries(orig.__code__) == [older, newer]
    fh.cache_insert(orig.__code__, newer)
    assert fh.cache_entries(orig.__code__) == [newer, older]
