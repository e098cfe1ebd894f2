"""DDP bucket assignment of a graph's nodes (ember.distributed.buckets), single process."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from ember.distributed.buckets import BucketCaps, assign_buckets


def traced_mlp(widths: list[int]) -> tuple[torch.fx.GraphModule, dict]:
    layers = [nn.Linear(a, b) for a, b in itertools.pairwise(widths)]

    flat = [t for layer in layers for t in (layer.weight, layer.bias)]
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    nodes = [graph.placeholder(f"p{i}") for i in range(len(flat))]
    for i in range(len(layers)):
        x = graph.call_function(torch.nn.functional.linear, (x, nodes[2 * i], nodes[2 * i + 1]))
        x = graph.call_function(torch.tanh, (x,))
    graph.output((x,))
    gm = torch.fx.GraphModule({}, graph)
    sizes = {node: t.numel() * t.element_size() for node, t in zip(nodes, flat, strict=True)}
    return gm, sizes


def test_buckets_follow_caps_in_reverse_order():
    gm, params = traced_mlp(
        [8, 8, 8, 8, 2]
    )  # three layers of 288 bytes, one of 72; a bucket closes once it reaches its cap
    pieces, buckets = assign_buckets(gm, params, BucketCaps((288, 288)))
    # backward order: the 72-byte layer joins the next one in the first bucket
    assert [b.nbytes for b in buckets] == [288, 288, 288 + 72]
    order = [pieces[n] for n in gm.graph.nodes if n.op == "call_function"]
    assert order == sorted(order) and order[0] == 0 and order[-1] == 2


def test_small_first_bucket_then_larger_ones():
    gm, params = traced_mlp([8, 8, 8, 8, 8])
    _, buckets = assign_buckets(gm, params, BucketCaps((1, 10_000)))
    assert [b.nbytes for b in buckets] == [288 * 3, 288]


def test_one_bucket_when_everything_fits():
    gm, params = traced_mlp([8, 8, 8])
    pieces, buckets = assign_buckets(gm, params, BucketCaps((10_000,)))
    assert len(buckets) == 1 and set(pieces.values()) == {0}
