"""F.scaled_dot_product_attention through aot: aten's fused kernel stays one node in the
forward and its fused backward one node in the backward, its tuple of outputs functionalized
and split by both partitioners (the logsumexp saved, never recomputed), results as eager's."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

from conftest import check_against_eager

FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
B, H, L, E = 2, 4, 6, 8


def _count(gm: torch.fx.GraphModule, target) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is target)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """HF's layout: (B, L, H*E) -> (B, L, H, E) -> (B, H, L, E) as a transposed view."""
    return x.view(B, L, heads, E).transpose(1, 2)


def attention(x, wq, wkv, mask, kv_heads: int, causal: bool):
    q = _heads(x @ wq, H)
    k, v = (x @ wkv).split(kv_heads * E, dim=-1)
    k, v = _heads(k, kv_heads), _heads(v, kv_heads)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=kv_heads != H
    )
    return out.transpose(1, 2).reshape(B, L, H * E).relu()


CASES = {
    "causal": (None, H, True),
    "bool_mask": (torch.ones(L, L, dtype=torch.bool).tril(), H, False),
    "float_mask": (torch.randn(B, 1, 1, L), H, False),
    "gqa": (None, 2, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention_stays_fused_forward_and_backward(case, partition_fn):
    mask, kv_heads, causal = CASES[case]
    torch.manual_seed(0)
    inputs = [
        torch.randn(B, L, H * E, requires_grad=True),
        torch.randn(H * E, H * E, requires_grad=True),
        torch.randn(H * E, 2 * kv_heads * E, requires_grad=True),
    ]

    def fn(x, wq, wkv):
        return attention(x, wq, wkv, mask, kv_heads, causal)

    _, fw, bw = check_against_eager(fn, inputs, partition_fn)
    (forward,), (backward,) = fw.graphs, bw.graphs
    assert _count(forward, FLASH) == 1 and _count(backward, FLASH) == 0  # never recomputed
    assert _count(backward, FLASH_BACKWARD) == 1
    assert not any("softmax" in str(n.target) for g in (forward, backward) for n in g.graph.nodes)
    # the backward reads the forward's logsumexp (output 1 of the fused op)
    backward_inputs = {n.name for n in backward.graph.nodes if n.op == "placeholder"}
    lse = [
        n
        for n in forward.graph.nodes
        if n.target is operator.getitem and n.args[0].target is FLASH and n.args[1] == 1
    ]
    assert len(lse) == 1 and lse[0].name in backward_inputs


def test_inference_traces_no_backward():
    q, k, v = (torch.randn(B, H, L, E) for _ in range(3))
    _, fw, bw = check_against_eager(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v]
    )
    assert _count(fw.graphs[0], FLASH) == 1 and bw.calls == 0
