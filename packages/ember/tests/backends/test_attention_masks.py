"""Attention masks rewritten before aot (attention_masks.py): a mask the graph proves all true
(HF transformers' traced bidirectional mask, `arange(L)[None, None, :, None] >= 0` expanded
to (B, 1, L, L)) is dropped, so aten picks its flash kernel as eager (which passes no mask)
does; any other mask stays. On CUDA a mask whose last dim is not of unit stride (the same
expanded mask, or an unproven one like it) is made dense: aten's fused CUDA kernels refuse it
and eager's choice would be the float32 math path."""

from __future__ import annotations

import contextlib
import operator

import pytest
import torch
import torch.fx
import torch.nn.functional as F

from ember.backends.attention_masks import fused_attention_masks

B, H, L, E = 2, 3, 5, 8


def _qkv(x):
    q = x.view(B, L, H, E).transpose(1, 2)
    return q, (q * 2).contiguous(), q + 1


def _index_mask(x, threshold=0):
    """HF's traced bidirectional mask: an index comparison broadcast to (B, 1, L, L)."""
    q_idx = (torch.arange(L, device=x.device) + 0)[None, None, :, None]
    return (q_idx >= threshold).expand(B, -1, L, L)


def hf_bidirectional(x):
    q, k, v = _qkv(x)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_index_mask(x), scale=0.3)


def strict_comparison(x):
    q, k, v = _qkv(x)
    mask = (torch.arange(L, device=x.device)[None, None, None, :] > -1).expand(B, 1, L, L)
    return F.scaled_dot_product_attention(q, k, v, mask)


def grouped_heads_causal_free(x):
    """Grouped-query heads (3 query heads share one key/value head) under the same mask."""
    q, k, v = _qkv(x)
    k, v = k[:, :1], v[:, :1]
    return F.scaled_dot_product_attention(q, k, v, _index_mask(x), 0.0, False, enable_gqa=True)


def or_with_input(x, user):
    q, k, v = _qkv(x)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=user | _index_mask(x))


def not_proven_threshold(x):
    q, k, v = _qkv(x)
    mask = _index_mask(x, threshold=1) | torch.eye(L, dtype=torch.bool, device=x.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def and_with_input(x, user):
    q, k, v = _qkv(x)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=user & _index_mask(x))


def from_values(x):
    q, k, v = _qkv(x)
    mask = (x.view(B, L, H * E).sum(-1)[:, None, :, None] > -1e9).expand(B, 1, L, L)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def float_mask(x):
    q, k, v = _qkv(x)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_index_mask(x).float())


def wider_batch(x):
    """A mask of more batches than the query: eager's output takes its batch dims."""
    q, k, v = _qkv(x)
    mask = (torch.arange(L, device=x.device)[None, None, :, None] >= 0).expand(3, B, H, L, L)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _traced(fn, inputs, mode=None):
    """`fn`'s graph with the tracer's `example_value`s (real CPU tensors, or fakes)."""
    gm = torch.fx.symbolic_trace(fn)
    values = iter(inputs)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["example_value"] = next(values)
        elif node.op in ("call_function", "call_method"):
            args, kwargs = torch.fx.node.map_arg(
                (node.args, node.kwargs), lambda n: n.meta["example_value"]
            )
            if node.op == "call_method":
                target, args = getattr(args[0], node.target), args[1:]
            else:
                target = node.target
            with (
                mode or contextlib.nullcontext(),
                contextlib.suppress(RuntimeError),
            ):  # eager's error: no value
                node.meta["example_value"] = target(*args, **kwargs)
    return gm


def _sdpa_mask(gm):
    (node,) = [n for n in gm.graph.nodes if n.target is F.scaled_dot_product_attention]
    return node.kwargs["attn_mask"] if "attn_mask" in node.kwargs else node.args[3]


def _inputs(with_user_mask):
    x = torch.randn(B, L, H * E)
    user = torch.rand(L, L, generator=torch.Generator().manual_seed(1)) > 0.5
    user[:, 0] = True
    return [x, user] if with_user_mask else [x]


@pytest.mark.parametrize(
    "fn",
    [hf_bidirectional, strict_comparison, grouped_heads_causal_free, or_with_input],
    ids=lambda f: f.__name__,
)
def test_a_provably_all_true_mask_is_dropped(fn):
    inputs = _inputs(fn is or_with_input)
    gm = _traced(fn, inputs)
    assert fused_attention_masks(gm) == 1
    assert _sdpa_mask(gm) is None
    # the proof's nodes went with it (nothing reads them); inputs stay
    targets = {n.target for n in gm.graph.nodes}
    assert torch.arange not in targets and operator.ge not in targets
    assert len([n for n in gm.graph.nodes if n.op == "placeholder"]) == len(inputs)
    torch.testing.assert_close(gm(*inputs), fn(*inputs))


@pytest.mark.parametrize(
    "fn",
    [not_proven_threshold, and_with_input, from_values, float_mask, wider_batch],
    ids=lambda f: f.__name__,
)
def test_any_other_mask_stays(fn):
    inputs = _inputs(fn is and_with_input)
    gm = _traced(fn, inputs)
    before = _sdpa_mask(gm)
    assert fused_attention_masks(gm) == 0  # CPU values: no dense copy either
    assert _sdpa_mask(gm) is before
    if fn is wider_batch:  # eager raises, and still does
        for run in (fn, gm):
            with pytest.raises(RuntimeError, match="broadcast"):
                run(*inputs)
    else:
        torch.testing.assert_close(gm(*inputs), fn(*inputs), equal_nan=True)


cuda_build = pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="fake CUDA tensors need torch's CUDA build (run under /work/venv312)",
)


def _cuda_fakes(inputs):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        return mode, [mode.from_tensor(t).to("cuda") for t in inputs]


@cuda_build
def test_a_cuda_mask_of_strided_last_dim_is_made_dense():
    # aten's fused CUDA kernels need attn_mask.stride(-1) == 1, else eager's choice is math
    mode, fakes = _cuda_fakes(_inputs(False))
    gm = _traced(from_values, fakes, mode)
    before = _sdpa_mask(gm)
    assert before.meta["example_value"].stride()[-1] == 0
    assert fused_attention_masks(gm) == 1
    dense = _sdpa_mask(gm)
    assert dense.target == "contiguous" and dense.args == (before,)
    value = dense.meta["example_value"]
    assert value.stride()[-1] == 1 and value.shape == before.meta["example_value"].shape
    assert value.device.type == "cuda"


@cuda_build
def test_a_dense_cuda_mask_and_a_provable_one():
    mode, fakes = _cuda_fakes(_inputs(True))
    gm = _traced(and_with_input, fakes, mode)  # user & index mask: dense already
    assert _sdpa_mask(gm).meta["example_value"].stride()[-1] == 1
    assert fused_attention_masks(gm) == 0
    mode, fakes = _cuda_fakes(_inputs(False))
    gm = _traced(hf_bidirectional, fakes, mode)
    (sdpa,) = [n for n in gm.graph.nodes if n.target is F.scaled_dot_product_attention]
    old = sdpa.meta["example_value"]
    assert fused_attention_masks(gm) == 1 and _sdpa_mask(gm) is None  # dropped, not copied
    refreshed = sdpa.meta["example_value"]  # computed again, without the mask
    assert refreshed is not old
    assert refreshed.device.type == "cuda" and refreshed.shape == (B, H, L, E)
