"""T5 encoder-decoder (``T5ForConditionalGeneration``), random weights, seq2seq LM loss.

Decoder inputs are derived from ``labels`` by the model (shift right), so the case
only passes ``input_ids`` and ``labels``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import T5Config, T5ForConditionalGeneration

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class T5Size:
    batch: int
    src_len: int
    tgt_len: int
    layers: int  # per stack (encoder and decoder)
    d_model: int
    d_kv: int
    d_ff: int
    heads: int
    vocab: int


CONFIGS = {
    "tiny": T5Size(
        batch=2, src_len=16, tgt_len=8, layers=2, d_model=32, d_kv=8, d_ff=64, heads=4, vocab=128
    ),
    # t5-small shape (6 + 6 layers, d_model 512, vocab 32128) on short sequences.
    "real": T5Size(
        batch=2,
        src_len=64,
        tgt_len=32,
        layers=6,
        d_model=512,
        d_kv=64,
        d_ff=2048,
        heads=8,
        vocab=32128,
    ),
}


def _loss(output: Any) -> torch.Tensor:
    return output.loss


def make(size: str) -> CaseParts:
    s = CONFIGS[size]
    config = T5Config(
        vocab_size=s.vocab,
        d_model=s.d_model,
        d_kv=s.d_kv,
        d_ff=s.d_ff,
        num_layers=s.layers,
        num_decoder_layers=s.layers,
        num_heads=s.heads,
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        # library defaults otherwise: sdpa attention, use_cache (the cache is built from a
        # deep copy of the config, traced since issue 14)
    )
    model = T5ForConditionalGeneration(config)
    # Ids start at 2 so no pad (0) / eos (1) tokens appear mid-sequence.
    input_ids = torch.randint(2, s.vocab, (s.batch, s.src_len))
    labels = torch.randint(2, s.vocab, (s.batch, s.tgt_len))
    kwargs = {"input_ids": input_ids, "labels": labels}
    return CaseParts(model=model, inputs=(), kwargs=kwargs, loss_fn=_loss)
