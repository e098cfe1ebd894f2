"""Collectives inside compiled functions on 2 gloo ranks, against eager (run by launch.py)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import ember

HIDDEN, FEATURES = 16, 8


def _explain_ops(fn, *args) -> dict:
    out = ember.explain(fn)(*args)
    return {
        "graph_count": out.graph_count,
        "breaks": [f"{b.reason} at {b.location}" for b in out.breaks],
        "ops": out.ops_per_graph,
    }


def tensor_parallel_mlp(rank: int, world: int) -> dict:
    """Column-parallel linear, row-parallel linear, all_reduce: one graph, eager's result,
    and the unsharded MLP's."""
    torch.manual_seed(0)
    w1, w2 = torch.randn(HIDDEN, FEATURES), torch.randn(FEATURES, HIDDEN)
    x = torch.randn(4, FEATURES)
    shard = HIDDEN // world
    w1_local = w1[rank * shard : (rank + 1) * shard].contiguous()  # output features split
    w2_local = w2[:, rank * shard : (rank + 1) * shard].contiguous()  # input features split
    group = dist.group.WORLD

    def mlp(x, w1, w2):
        h = torch.relu(x @ w1.t())
        return funcol.all_reduce(h @ w2.t(), "sum", group) * 0.5

    ember.reset()
    expected = mlp(x, w1_local, w2_local)
    compiled = ember.compile(mlp)
    got = compiled(x, w1_local, w2_local)
    got_again = compiled(x, w1_local, w2_local)
    full = torch.relu(x @ w1.t()) @ w2.t() * 0.5
    return {
        "difference": (got - expected).abs().max().item(),
        "again_difference": (got_again - expected).abs().max().item(),
        "unsharded_difference": (got - full).abs().max().item(),
        "forward_graphs": ember.counters["inductor"]["forward_graphs"],
        "collectives": dict(ember.counters["collectives"]),
        "aten_fallbacks": dict(ember.counters["aten_fallbacks"]),
        "inductor_fallbacks": dict(ember.counters["inductor_fallbacks"]),
        **_explain_ops(mlp, x, w1_local, w2_local),
    }


def inplace_c10d_calls(rank: int, world: int) -> dict:
    """dist.all_reduce / all_gather_into_tensor / reduce_scatter_tensor as a user writes
    them: rewritten functional (+ copy back), one graph, eager's values."""

    def step(x):
        y = x * (dist.get_rank() + 1)
        dist.all_reduce(y)
        gathered = torch.empty(world * x.shape[0], *x.shape[1:])
        dist.all_gather_into_tensor(gathered, y.sin())
        scattered = torch.empty_like(x)
        dist.reduce_scatter_tensor(scattered, gathered.cos(), op=dist.ReduceOp.MAX)
        return y + 1, gathered, scattered

    x = torch.arange(12.0).reshape(4, 3)
    ember.reset()
    expected = step(x)
    got = ember.compile(step)(x)
    return {
        "difference": max((a - b).abs().max().item() for a, b in zip(got, expected, strict=True)),
        "forward_graphs": ember.counters["inductor"]["forward_graphs"],
        **_explain_ops(step, x),
    }


def gather_and_scatter_functional(rank: int, world: int) -> dict:
    """all_gather along dim 1 then reduce_scatter along dim 1: back to world * x."""

    def roundtrip(x):
        g = funcol.all_gather_single(x.exp(), 1, dist.group.WORLD)
        return funcol.reduce_scatter_single(g * 2, "sum", 1, dist.group.WORLD)

    x = torch.randn(3, 4) + rank
    ember.reset()
    expected = roundtrip(x)
    got = ember.compile(roundtrip)(x)
    return {
        "difference": (got - expected).abs().max().item(),
        "closed_form_difference": (got - 2 * world * x.exp()).abs().max().item(),
        **_explain_ops(roundtrip, x),
    }


SCENARIOS = {
    "tensor_parallel_mlp": tensor_parallel_mlp,
    "inplace_c10d_calls": inplace_c10d_calls,
    "gather_and_scatter_functional": gather_and_scatter_functional,
}
