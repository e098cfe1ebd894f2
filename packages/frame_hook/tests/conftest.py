from __future__ import annotations

import pytest

import ember_frame_hook as fh


@pytest.fixture(autouse=True)
def clean_hook():
    """Every test starts and ends with the hook off, empty caches and the default limit."""
    fh.set_eval_frame(None)
    fh.reset()
    fh.reset_stats()
    limit = fh.set_cache_limit(8)
    yield
    fh.set_eval_frame(None)
    fh.reset()
    fh.set_cache_limit(limit)


class Recorder:
    """A callback that substitutes `table[code]` for the listed code objects and records calls."""

    def __init__(self, table=None, guard=None):
        self.table = dict(table or {})
        self.guard = guard or (lambda f_locals: True)
        self.calls = []

    def __call__(self, frame, cache):
        if frame.f_code not in self.table:
            return None
        self.calls.append((frame.f_code.co_name, dict(frame.f_locals), cache))
        return fh.GuardedCode(self.table[frame.f_code], self.guard)


def substitute_for(original, replacement):
    """The code of `replacement`, renamed so it can stand in for `original`'s frames."""
    return replacement.__code__.replace(co_name=original.__code__.co_name)
