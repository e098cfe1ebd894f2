"""A pointwise value calling a costly libm function that a reader broadcasts is stored once
(graph.py: HEAVY_BROADCAST_MIN): a rotary embedding's cos and sin tables, [seq, dim], read by
every batch element and head of q and k."""

import dataclasses

import torch

from conftest import FUSING_GPU, check_against_eager
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims

#: a GPU target that recomputes transcendentals rather than store them (the Triton one's 1):
#: only the broadcast rule stores the tables
RECOMPUTING_GPU = dataclasses.replace(FUSING_GPU, name="recomputing", transcendental_op_cost=1)


def _lower_and_check(fn, *inputs):
    return check_against_eager(fn, *inputs, target=RECOMPUTING_GPU)[0]


def _buffer_sizes(lowering) -> list[list[int]]:
    return [
        [int(s) for s in b.layout.size]
        for b in lowering.buffers.values()
        if isinstance(b, ComputedBuffer)
    ]


SHAPE = [2, 3, 8, 16]


def _rotary(q, k, freqs):
    # q, k: [B, H, S, D]; freqs: [S, D]; cos/sin tables broadcast over batch and heads
    shape = SHAPE
    cos = prims.broadcast_in_dim(prims.mul(prims.cos(freqs), freqs), shape, [2, 3])
    sin = prims.broadcast_in_dim(prims.sin(freqs), shape, [2, 3])
    rotated_q = prims.add(prims.mul(q, cos), prims.mul(prims.neg(q), sin))
    rotated_k = prims.add(prims.mul(k, cos), prims.mul(k, sin))
    return rotated_q, rotated_k


def test_rotary_tables_are_computed_once():
    q, k, freqs = torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 16), torch.randn(8, 16)
    lowering = _lower_and_check(_rotary, q, k, freqs)
    sizes = _buffer_sizes(lowering)
    assert sizes.count([8, 16]) == 2, sizes  # the cos and the sin table
    assert sizes.count([2, 3, 8, 16]) == 2, sizes  # the rotated q and k


def test_cheap_or_unbroadcast_values_stay_inline():
    def gate(x, g):
        # a squeeze-excitation gate: sigmoid (an exp) broadcast over the pixels
        wide = prims.broadcast_in_dim(prims.sigmoid(g), [2, 4, 6, 6], [0, 1])
        return (prims.mul(x, wide),)

    def same_size(x, f):
        return (prims.mul(x, prims.cos(f)),)

    lowering = _lower_and_check(gate, torch.randn(2, 4, 6, 6), torch.randn(2, 4))
    assert _buffer_sizes(lowering) == [[2, 4, 6, 6]]
    lowering = _lower_and_check(same_size, torch.randn(8, 16), torch.randn(8, 16))
    assert _buffer_sizes(lowering) == [[8, 16]]


def _window_bias(attn, table, index):
    # Swin's relative-position bias: [heads, 49, 49] gathered from a [169, heads] table,
    # added to every window's attention scores [windows, heads, 49, 49]
    bias = prims.index_select(table, 0, index)  # [2401, heads]
    bias = prims.clone(prims.permute(prims.reshape(bias, [49, 49, 4]), [2, 0, 1]))
    return (prims.add(attn, prims.broadcast_in_dim(bias, [8, 4, 49, 49], [1, 2, 3])),)


def _window_bias_inputs():
    index = torch.randint(0, 169, (49 * 49,), dtype=torch.int64)
    return torch.randn(8, 4, 49, 49), torch.randn(169, 4), index


def test_a_broadcast_gather_is_gathered_once():
    lowering = _lower_and_check(_window_bias, *_window_bias_inputs())
    sizes = _buffer_sizes(lowering)
    assert [4, 49, 49] in sizes, sizes  # the bias, gathered once for the 8 windows
    assert sizes.count([8, 4, 49, 49]) == 1, sizes


def test_without_the_rule_the_gather_is_recomputed(monkeypatch):
    from ember_inductor_ir import graph

    monkeypatch.setattr(graph, "STORE_BROADCAST_GATHERS", False)
    lowering = _lower_and_check(_window_bias, *_window_bias_inputs())
    assert _buffer_sizes(lowering) == [[8, 4, 49, 49]]
