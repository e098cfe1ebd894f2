"""Each thread has its own setting; a thread's setting dies with the thread."""

from __future__ import annotations

import gc
import sys
import threading
import weakref

import ember_frame_hook as fh
from conftest import Recorder, substitute_for


def work(x):
    return ("orig", x)


def work_sub(x):
    return ("sub", x)


def in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # surfaced to the test below
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_setting_is_per_thread():
    rec = Recorder({work.__code__: substitute_for(work, work_sub)})
    with fh.eval_frame(rec):
        assert work(1) == ("sub", 1)
        assert in_thread(lambda: (fh.get_eval_frame(), work(2))) == (None, ("orig", 2))
    assert work(3) == ("orig", 3)


def test_other_thread_can_trace_while_main_is_off():
    rec = Recorder({work.__code__: substitute_for(work, work_sub)})

    def traced():
        with fh.eval_frame(rec):
            return work(5)

    assert in_thread(traced) == ("sub", 5)
    assert work(5) == ("orig", 5)
    # The cache lives on the code object: run-only mode here now finds the entry.
    with fh.eval_frame(False):
        assert work(6) == ("sub", 6)


def test_thread_ending_with_hook_on_releases_its_callback():
    class Callback:
        def __call__(self, frame, cache):
            return None

    holder = [Callback()]
    ref = weakref.ref(holder[0])
    in_thread(lambda: fh.set_eval_frame(holder.pop()))
    gc.collect()
    assert ref() is None, "the ended thread's setting must be released"
    assert work(1) == ("orig", 1)


def test_many_threads_tracing_concurrently():
    rec = Recorder({work.__code__: substitute_for(work, work_sub)})
    errors = []

    def run(i):
        try:
            with fh.eval_frame(rec):
                for j in range(2000):
                    assert work(j) == ("sub", j)
        except BaseException as exc:
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert fh.get_eval_frame() is None
