"""100k calls through each path leave refcounts, frame objects and traced memory unchanged."""

from __future__ import annotations

import contextlib
import gc
import sys
import tracemalloc
import types

import pytest

import ember_frame_hook as fh
from conftest import substitute_for

CALLS = 100_000


def target(x, *rest, k=1, **kw):
    return x


def target_sub(x, *rest, k=1, **kw):
    return x + 1


SUB = substitute_for(target, target_sub)


def always(f_locals):
    return True


def never(f_locals):
    return False


def hit_callback(frame, cache):
    return fh.GuardedCode(SUB, always) if frame.f_code is target.__code__ else None


def none_callback(frame, cache):
    return None


def churn_callback(frame, cache):
    """Always misses (guards never pass) and inserts: exercises eviction at the limit."""
    return fh.GuardedCode(SUB, never) if frame.f_code is target.__code__ else None


def raising_callback(frame, cache):
    if frame.f_code is target.__code__:
        raise LookupError("nope")
    return None


def raising_guard(f_locals):
    raise LookupError("guard")


def run_calls(setting, n):
    with fh.eval_frame(setting):
        for i in range(n):
            with contextlib.suppress(LookupError, fh.GuardError):
                target(i, 1, 2, k=3, extra=4)


def live_frames():
    return sum(isinstance(o, types.FrameType) for o in gc.get_objects())


def watched():
    objects = (target.__code__, SUB, target, always, never, hit_callback, churn_callback)
    return [sys.getrefcount(o) for o in objects]


def prepare_guard_error_cache():
    fh.set_eval_frame(None)

    def callback(frame, cache):
        return fh.GuardedCode(SUB, raising_guard) if frame.f_code is target.__code__ else None

    with fh.eval_frame(callback):
        target(0)


PATHS = {
    "hit": (hit_callback, None),
    "miss-callback-none": (none_callback, None),
    "miss-insert-evict": (churn_callback, None),
    "run-only-miss": (False, None),
    "callback-raises": (raising_callback, None),
    "guard-raises": (False, prepare_guard_error_cache),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_no_leaks(path):
    setting, prepare = PATHS[path]
    fh.set_cache_limit(2)
    if prepare is not None:
        prepare()
    run_calls(setting, 2_000)  # warm up caches, interned objects, free lists
    gc.collect()
    refs_before = watched()
    frames_before = live_frames()
    tracemalloc.start()
    try:
        run_calls(setting, 1_000)
        gc.collect()
        mem_before = tracemalloc.get_traced_memory()[0]
        run_calls(setting, CALLS)
        gc.collect()
        mem_after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert watched() == refs_before
    assert live_frames() == frames_before
    # A leak of even one small object per call would be >= 3 MB here.
    assert mem_after - mem_before < 64 * 1024, f"traced memory grew {mem_after - mem_before} B"


def test_dropping_code_frees_its_cache_and_entries():
    import weakref

    namespace = {}
    exec("def f(x):\n    return x\n", namespace)
    f = namespace.pop("f")
    guard_calls = []

    class Guard:
        def __call__(self, f_locals):
            guard_calls.append(1)
            return True

    made = {"guard": Guard(), "code": f.__code__, "entry_code": f.__code__.replace(co_name="g")}
    guard_ref = weakref.ref(made["guard"])

    def callback(frame, cache):
        if frame.f_code is made["code"]:
            return fh.GuardedCode(made["entry_code"], made["guard"])
        return None

    with fh.eval_frame(callback):
        f(1)
        f(2)
    assert guard_calls == [1]
    del f
    made.clear()
    gc.collect()
    assert guard_ref() is None, "the code object's death must free its cache"
