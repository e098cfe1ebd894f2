"""torch.distributed collectives traced as graph nodes (variables/collectives.py), on a
one-rank gloo group (collectives run and are identities; the 2-rank checks live in
integration_tests/test_distributed_collectives.py)."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from conftest import Compiled, same

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed")


@pytest.fixture(scope="module", autouse=True)
def one_rank_group():
    if dist.is_initialized():
        yield
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_functional_all_reduce_is_two_nodes_in_one_graph():
    def f(x):
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

    c = Compiled(f)
    x = torch.randn(4)
    assert same(c(x), f(x))
    assert c.backend.graph_count == 1 and not c.breaks
    assert c.backend.ops() == ["mul", "all_reduce.default", "wait_tensor.default", "add"]


def test_inplace_all_reduce_is_rewritten_functional_with_copy_back():
    def f(x):
        y = x * 2
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        return y + 1

    c = Compiled(f)
    x = torch.randn(4)
    assert same(c(x), f(x))
    assert c.backend.graph_count == 1 and not c.breaks
    assert c.backend.ops() == ["mul", "all_reduce.default", "wait_tensor.default", "copy_", "add"]
    (reduce,) = [n for n in c.backend.graphs[0].graph.nodes if "all_reduce" in str(n.target)]
    assert reduce.args[1] == "max"


# the `_single` spellings are newer than torch 2.11, whose `_tensor` ones take the same args
ALL_GATHER = getattr(funcol, "all_gather_single", funcol.all_gather_tensor)
REDUCE_SCATTER = getattr(funcol, "reduce_scatter_single", funcol.reduce_scatter_tensor)


def test_all_gather_and_reduce_scatter_along_other_dims():
    def f(x):
        g = ALL_GATHER(x, 1, dist.group.WORLD)
        return REDUCE_SCATTER(g, "sum", 1, dist.group.WORLD)

    c = Compiled(f)
    x = torch.randn(2, 3)
    assert same(c(x), f(x))
    assert c.backend.graph_count == 1 and not c.breaks
    ops = c.backend.ops()
    assert "all_gather_into_tensor.default" in ops and "reduce_scatter_tensor.default" in ops


def test_process_group_is_guarded_by_identity():
    other = dist.new_group([0])

    def f(x, group):
        return funcol.all_reduce(x, "sum", group) * 3

    c = Compiled(f)
    x = torch.randn(4)
    assert same(c(x, dist.group.WORLD), f(x, dist.group.WORLD))
    assert same(c(x, dist.group.WORLD), f(x, dist.group.WORLD))
    assert c.backend.graph_count == 1
    assert same(c(x, other), f(x, other))
    assert c.backend.graph_count == 2  # another group: another trace, naming that group
    names = [
        n.args[2] for g in c.backend.graphs for n in g.graph.nodes if "all_reduce" in str(n.target)
    ]
    assert names == [dist.group.WORLD.group_name, other.group_name]


def test_async_op_is_a_graph_break():
    def f(x):
        y = x + 1
        work = dist.all_reduce(y, async_op=True)
        work.wait()
        return y * 2

    c = Compiled(f)
    x = torch.randn(4)
    assert same(c(x), f(x))
    assert any("async_op" in b.reason for b in c.breaks)


def test_rank_and_world_size_are_trace_time_constants():
    def f(x):
        return x * dist.get_rank() + dist.get_world_size()

    c = Compiled(f)
    x = torch.randn(4)
    assert same(c(x), f(x))
    assert c.backend.graph_count == 1 and not c.breaks
