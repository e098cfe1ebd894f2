"""Frames the hook leaves alone: generators, coroutines, tracing, class bodies; re-entrancy."""

from __future__ import annotations

import asyncio
import sys

import pytest

import ember_frame_hook as fh
from conftest import Recorder, substitute_for


def gen(n):
    yield from range(n)


async def coro(x):
    return x


async def agen(n):
    for i in range(n):
        yield i


def plain(x):
    return ("orig", x)


def plain_sub(x):
    return ("sub", x)


def test_generators_coroutines_async_generators_are_not_offered():
    seen = []

    def callback(frame, cache):
        seen.append(frame.f_code.co_name)
        return None

    async def collect():
        return [i async for i in agen(3)]

    with fh.eval_frame(callback):
        assert list(gen(3)) == [0, 1, 2]
        assert asyncio.run(coro(4)) == 4
        assert asyncio.run(collect()) == [0, 1, 2]
    assert "gen" not in seen and "coro" not in seen and "agen" not in seen
    assert fh.stats()["passthrough"] > 0


def test_class_bodies_and_module_code_are_not_offered():
    seen = []
    with fh.eval_frame(lambda frame, cache: seen.append(frame.f_code.co_name)):

        class Body:
            x = 1

        exec(compile("y = 2", "<module>", "exec"), {})
    assert "Body" not in seen and "<module>" not in seen


def test_frames_under_settrace_are_left_alone():
    rec = Recorder({plain.__code__: substitute_for(plain, plain_sub)})
    fh.reset()
    with fh.eval_frame(rec):
        sys.settrace(lambda *args: None)
        try:
            assert plain(1) == ("orig", 1)
        finally:
            sys.settrace(None)
        assert plain(1) == ("sub", 1)


def test_frames_under_a_profiler_run_substituted_and_the_profiler_sees_them():
    """A profile shows the program that runs: sys.setprofile's function and cProfile see the
    substitute's calls; the profile function's own frames are never offered."""
    import cProfile
    import pstats

    offered = []
    sub = substitute_for(plain, plain_sub)

    def callback(frame, cache):
        offered.append(frame.f_code.co_name)
        return (
            fh.GuardedCode(sub, lambda f_locals: True) if frame.f_code is plain.__code__ else None
        )

    events = []

    def profile_function(frame, event, arg):
        events.append((event, frame.f_code.co_name, frame.f_code.co_firstlineno))

    fh.reset()
    with fh.eval_frame(callback):
        sys.setprofile(profile_function)
        try:
            assert plain(1) == ("sub", 1)
        finally:
            sys.setprofile(None)
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            assert plain(2) == ("sub", 2)
        finally:
            profiler.disable()
    ran = sub.co_firstlineno
    assert ("call", "plain", ran) in events
    assert "profile_function" not in offered
    profiled = pstats.Stats(profiler).stats  # (file, line, name) -> counts
    assert any(name == "plain" and line == ran for _, line, name in profiled)


def test_callback_is_never_entered_reentrantly():
    depth = []
    seen = []

    def helper(x):
        return x

    def callback(frame, cache):
        depth.append(1)
        assert len(depth) == 1, "re-entered"
        seen.append(frame.f_code.co_name)
        helper(1)  # a Python call inside the callback: not offered to the callback
        depth.pop()
        return None

    with fh.eval_frame(callback):
        plain(1)
    assert "helper" not in seen and "plain" in seen


def test_guards_run_with_the_hook_off():
    def helper(f_locals):
        return True

    offered = []

    def callback(frame, cache):
        offered.append(frame.f_code.co_name)
        if frame.f_code is plain.__code__:
            return fh.GuardedCode(substitute_for(plain, plain_sub), lambda f: helper(f))
        return None

    with fh.eval_frame(callback):
        plain(1)
        plain(2)
    assert "helper" not in offered and "<lambda>" not in offered


def test_callback_may_switch_the_hook_off_for_itself():
    def callback(frame, cache):
        fh.set_eval_frame(None)
        return None

    fh.set_eval_frame(callback)
    assert plain(1) == ("orig", 1)
    assert fh.get_eval_frame() is None


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_frames_under_a_sys_monitoring_tool_are_left_alone():
    mon = sys.monitoring
    rec = Recorder({plain.__code__: substitute_for(plain, plain_sub)})
    with fh.eval_frame(rec):
        assert plain(1) == ("sub", 1)
        mon.use_tool_id(mon.DEBUGGER_ID, "test-debugger")
        try:
            mon.register_callback(mon.DEBUGGER_ID, mon.events.PY_START, lambda code, offset: None)
            mon.set_events(mon.DEBUGGER_ID, mon.events.PY_START)
            assert plain(1) == ("orig", 1)
        finally:
            mon.set_events(mon.DEBUGGER_ID, 0)
            mon.register_callback(mon.DEBUGGER_ID, mon.events.PY_START, None)
            mon.free_tool_id(mon.DEBUGGER_ID)
        assert plain(1) == ("sub", 1)
