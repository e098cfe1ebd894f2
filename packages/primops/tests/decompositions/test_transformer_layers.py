"""aten's fused inference kernels of nn.MultiheadAttention and nn.TransformerEncoderLayer
(decompositions/transformer_layers.py) equal eager's: post- and pre-norm layers, ReLU and
GELU, no mask, key padding, boolean and float attention masks; attention weights averaged
or per head, or none (need_weights=False)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten


def _masks():
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[0, 5:] = padding[2, 3:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(7)
    return {
        "none": {},
        "key padding": {"src_key_padding_mask": padding},
        "float mask": {"src_mask": causal},
        "bool mask": {"src_mask": causal == float("-inf")},
    }


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masking", sorted(_masks()))
def test_encoder_layer_fast_path_equals_eagers(norm_first, activation, masking):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        32, 4, 64, batch_first=True, norm_first=norm_first, activation=activation
    ).eval()
    x, kwargs = torch.randn(3, 7, 32), _masks()[masking]
    mode = DecomposeMode(strict=True)
    with torch.no_grad():
        want = layer(x, **kwargs)
        with mode:
            got = layer(x, **kwargs)
    assert "aten._transformer_encoder_layer_fwd.default" in mode.decomposed_counts
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "mask,mask_type,need_weights,average",
    [(None, None, True, True), (None, None, True, False), ("padding", 1, True, True),
     ("padding", 1, False, True), ("merged", 2, True, False), ("square", 0, False, True)],
)  # fmt: skip
def test_native_multi_head_attention_equals_eagers(mask, mask_type, need_weights, average):
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    q = torch.randn(3, 7, 32)
    masks = {
        "padding": torch.rand(3, 7) > 0.7,
        "merged": torch.rand(3, 4, 7, 7) > 0.7,
        "square": torch.ones(7, 7, dtype=torch.bool).triu(1),
    }
    args = (q, q, q, 32, 4, *(t.detach() for t in (attention.in_proj_weight,
            attention.in_proj_bias, attention.out_proj.weight, attention.out_proj.bias)),
            masks.get(mask), need_weights, average, mask_type)  # fmt: skip
    want = aten._native_multi_head_attention(*args)
    with DecomposeMode(strict=True):
        got = aten._native_multi_head_attention(*args)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    if need_weights:
        torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
    else:  # eager's kernel leaves them undefined; the meta (and so a graph) has them empty
        assert got[1].numel() == 0
