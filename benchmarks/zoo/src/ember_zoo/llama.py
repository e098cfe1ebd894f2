"""Llama decoder (``LlamaForCausalLM``), random weights, causal-LM loss.

Uses grouped-query attention (fewer key/value heads than query heads), RMSNorm, RoPE
and SwiGLU, i.e. the ops that distinguish modern decoders from GPT-2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class LlamaSize:
    batch: int
    seq: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int


CONFIGS = {
    "tiny": LlamaSize(
        batch=2, seq=16, layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=128
    ),
    # A ~GPT-2-small-sized Llama (12 x 768, GQA 12/4 heads, 32000 vocab).
    "real": LlamaSize(
        batch=2,
        seq=64,
        layers=12,
        hidden=768,
        heads=12,
        kv_heads=4,
        intermediate=2048,
        vocab=32000,
    ),
}


def _loss(output: Any) -> torch.Tensor:
    return output.loss


def make(size: str) -> CaseParts:
    s = CONFIGS[size]
    config = LlamaConfig(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        max_position_embeddings=max(2048, s.seq),
        attention_dropout=0.0,
        # library defaults: sdpa attention, use_cache as the config says (issue 14)
    )
    model = LlamaForCausalLM(config)
    input_ids = torch.randint(0, s.vocab, (s.batch, s.seq))
    kwargs = {"input_ids": input_ids, "labels": input_ids.clone()}
    return CaseParts(model=model, inputs=(), kwargs=kwargs, loss_fn=_loss)
