"""Native guards (issue 15) leak nothing: a frame's GuardProgram run 10**5 times, and a
compiled function called through the frame hook's cache lookup 10**5 times, leave the
reference counts of everything they read and the traced memory where they were."""

from __future__ import annotations

import gc
import sys
import tracemalloc

import torch
from torch import nn

import ember
import ember_frame_hook as fh

SCALE = 0.5
TABLE = {"bias": 1.0, "mode": "add"}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.flags = [True, 3]

    def forward(self, x, extra):
        y = self.fc(x) * SCALE
        if TABLE["mode"] == "add" and self.flags[0]:
            y = y + TABLE["bias"] + extra[0]
        return y


def _refcounts(*objects):
    return [sys.getrefcount(o) for o in objects]


@torch.no_grad()  # the guard checks the grad mode it was traced under
def test_native_guard_runs_leak_nothing():
    block = Block()
    compiled = ember.compile(block, backend="eager")
    x, extra = torch.randn(2, 4), [torch.ones(4)]
    compiled(x, extra)
    (record,) = compiled._ember_compiler.records
    program = record.guards.native
    assert isinstance(program, fh.GuardProgram)
    f_locals = {"self": block, "x": x, "extra": extra}
    watched = (block, x, extra, extra[0], block.fc, block.fc.weight, TABLE, SCALE)
    for _ in range(100):
        assert program(f_locals)
    gc.collect()
    counts = _refcounts(*watched)
    tracemalloc.start()
    first, _ = tracemalloc.get_traced_memory()
    for _ in range(10**5):  # a byte kept per run would pass the bound below
        program(f_locals)
    last, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert program(f_locals)
    assert _refcounts(*watched) == counts
    assert last - first < 64 * 1024  # no per-call allocation survives
    TABLE["mode"] = "sub"
    try:
        assert not program(f_locals)  # still a real check
    finally:
        TABLE["mode"] = "add"


def test_calls_through_the_hook_leak_nothing():
    ember.reset()  # else the entry the test above compiled (same backend) is taken over
    block = Block()
    compiled = ember.compile(block, backend="eager")
    x, extra = torch.randn(2, 4), [torch.ones(4)]
    with torch.no_grad():
        expected = block(x, extra)
        for _ in range(100):
            compiled(x, extra)
        gc.collect()
        watched = (block, x, extra, extra[0], block.fc.weight, TABLE)
        counts = _refcounts(*watched)
        for _ in range(10**5):
            out = compiled(x, extra)
        del out
        gc.collect()
        assert _refcounts(*watched) == counts
        torch.testing.assert_close(compiled(x, extra), expected)
    assert len(compiled._ember_compiler.records) == 1
