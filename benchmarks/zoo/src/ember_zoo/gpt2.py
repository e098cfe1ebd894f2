"""GPT-2 decoder with its LM head (``GPT2LMHeadModel``), random weights, causal-LM loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class GPT2Size:
    batch: int
    seq: int
    layers: int
    hidden: int
    heads: int
    vocab: int


CONFIGS = {
    "tiny": GPT2Size(batch=2, seq=16, layers=2, hidden=32, heads=2, vocab=128),
    # GPT-2 small shape (12 x 768, vocab 50257) on a short sequence.
    "real": GPT2Size(batch=2, seq=64, layers=12, hidden=768, heads=12, vocab=50257),
}


def _loss(output: Any) -> torch.Tensor:
    return output.loss


def make(size: str) -> CaseParts:
    s = CONFIGS[size]
    config = GPT2Config(
        vocab_size=s.vocab,
        n_positions=max(1024, s.seq),
        n_embd=s.hidden,
        n_layer=s.layers,
        n_head=s.heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        # GPT-2's default bos/eos (50256) lie outside the tiny vocabulary.
        bos_token_id=s.vocab - 1,
        eos_token_id=s.vocab - 1,
        # library defaults: sdpa attention, use_cache as the config says (issue 14)
    )
    model = GPT2LMHeadModel(config)
    # transformers cannot infer the loss from this class name and warns; name it explicitly.
    model.loss_type = "ForCausalLM"
    input_ids = torch.randint(0, s.vocab, (s.batch, s.seq))
    # labels == input_ids: the model shifts them internally for next-token prediction.
    kwargs = {"input_ids": input_ids, "labels": input_ids.clone()}
    return CaseParts(model=model, inputs=(), kwargs=kwargs, loss_fn=_loss)
