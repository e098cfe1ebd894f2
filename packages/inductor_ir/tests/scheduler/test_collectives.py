"""Collectives as extern kernels: started early, waited for late (scheduler/collectives.py)."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist

from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.lowering.collectives import wait_collective
from ember_primops import prims

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed")


@pytest.fixture(scope="module")
def group_name():
    """A one-rank gloo group: collectives run (as identities) and have a name."""
    if dist.is_initialized():
        yield dist.group.WORLD.group_name
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield dist.group.WORLD.group_name
    finally:
        dist.destroy_process_group()


def _kinds(sched) -> list[str]:
    out = []
    for group in sched:
        extern = group.extern
        if extern is None:
            out.append("loops")
        elif extern.kernel is wait_collective:
            out.append("wait")
        elif isinstance(extern.kernel, torch._ops.OpOverload):
            out.append(extern.kernel_name.split("::")[-1])
        else:
            out.append(extern.kernel_name)
    return out


def test_all_reduce_overlaps_independent_matmul(group_name, check):
    c10d = torch.ops._c10d_functional

    def f(x, a, b):
        partial = prims.mul(x, x)
        reduced = c10d.wait_tensor(c10d.all_reduce(partial, "sum", group_name))
        independent = prims.mm(a, b)  # reads nothing the collective makes
        return (prims.add(reduced, x), prims.tanh(independent))

    inputs = (torch.randn(8, 8), torch.randn(8, 32), torch.randn(32, 8))
    _, sched = check(f, *inputs)
    kinds = _kinds(sched)
    assert kinds.index("all_reduce") < kinds.index("mm") < kinds.index("wait"), kinds
    # the collective's input lives until the wait: the wait takes it as an argument
    wait = next(
        g.extern for g in sched if g.extern is not None and g.extern.kernel is wait_collective
    )
    assert len(wait.tensor_args()) == 2


def test_wait_stays_before_its_reader(group_name, check):
    c10d = torch.ops._c10d_functional

    def f(x):
        gathered = c10d.wait_tensor(c10d.all_gather_into_tensor(prims.neg(x), 1, group_name))
        return (prims.exp(gathered),)

    _, sched = check(f, torch.randn(4, 4))
    kinds = _kinds(sched)
    assert kinds.index("all_gather_into_tensor") < kinds.index("wait") < len(kinds) - 1, kinds


def test_collectives_keep_their_order(group_name, check):
    c10d = torch.ops._c10d_functional

    def f(x, y):
        first = c10d.all_reduce(prims.exp(x), "sum", group_name)
        second = c10d.all_reduce(y, "max", group_name)  # ready earlier, issued second
        return (c10d.wait_tensor(first), c10d.wait_tensor(second))

    # values checked against eager (the one-rank group runs the collectives)
    _, sched = check(f, torch.randn(4), torch.randn(4))
    externs = [g.extern for g in sched if isinstance(g.extern, ExternKernel)]
    starts = [e.args[1] for e in externs if e.kernel_name.endswith("all_reduce")]
    assert starts == ["sum", "max"]
