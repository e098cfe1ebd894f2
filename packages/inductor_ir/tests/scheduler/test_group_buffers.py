"""A kernel takes at most MAX_GROUP_BUFFERS buffers: fusion stops before (a C++ kernel is
called through ctypes, at most 1024 arguments; 1300 parameters summed into one kernel could
not be called)."""

import torch

from conftest import compile_and_run
from ember_inductor_ir.scheduler.schedule import MAX_GROUP_BUFFERS
from ember_primops import prims


def test_fusion_stops_at_the_buffer_limit():
    count = MAX_GROUP_BUFFERS + 88

    # fx traces named parameters only: def many(x0, ..., xN) adding them up
    names = [f"x{k}" for k in range(count)]
    scope = {"prims": prims}
    body = "\n".join(f"    total = prims.add(total, {n})" for n in names[1:])
    exec(f"def many({', '.join(names)}):\n    total = x0\n{body}\n    return (total,)", scope)
    many = scope["many"]

    inputs = [torch.randn(4) for _ in range(count)]
    _, sched, got = compile_and_run(many, *inputs)
    torch.testing.assert_close(got[0], many(*inputs)[0])
    loops = [g for g in sched if g.extern is None]
    assert len(loops) > 1
    for group in loops:
        assert len(set(group.reads) | set(group.buffer_names())) <= MAX_GROUP_BUFFERS
