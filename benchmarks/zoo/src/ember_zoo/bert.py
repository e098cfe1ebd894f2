"""BERT encoder with a masked-LM head (``BertForMaskedLM``), random weights.

Uses the MLM head rather than bare ``BertModel`` so the loss reaches every parameter
(``BertModel``'s pooler would be left without a gradient). The batch is a padded
sentence pair, so the attention-mask and token-type paths are exercised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import BertConfig, BertForMaskedLM

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class BertSize:
    batch: int
    seq: int
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int


CONFIGS = {
    "tiny": BertSize(batch=2, seq=16, layers=2, hidden=32, heads=2, intermediate=64, vocab=128),
    # BERT-base shape (12 x 768, vocab 30522) on a short sequence.
    "real": BertSize(
        batch=2, seq=64, layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522
    ),
}


def _loss(output: Any) -> torch.Tensor:
    return output.loss


def make(size: str) -> CaseParts:
    s = CONFIGS[size]
    config = BertConfig(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        intermediate_size=s.intermediate,
        max_position_embeddings=max(512, s.seq),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        # library defaults: sdpa attention, use_cache as the config says (issue 14)
    )
    model = BertForMaskedLM(config)
    input_ids = torch.randint(1, s.vocab, (s.batch, s.seq))
    # Sentence pair: second half is segment B.
    token_type_ids = torch.zeros(s.batch, s.seq, dtype=torch.long)
    token_type_ids[:, s.seq // 2 :] = 1
    # The last sequence in the batch is right-padded by a quarter of its length.
    attention_mask = torch.ones(s.batch, s.seq, dtype=torch.long)
    attention_mask[-1, s.seq - s.seq // 4 :] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    # Predict a random token at every real position; padding is ignored (-100).
    labels = torch.randint(0, s.vocab, (s.batch, s.seq)).masked_fill(attention_mask == 0, -100)
    kwargs = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "labels": labels,
    }
    return CaseParts(model=model, inputs=(), kwargs=kwargs, loss_fn=_loss)
