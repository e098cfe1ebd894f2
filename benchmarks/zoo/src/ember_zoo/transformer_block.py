"""Hand-written pre-norm transformer block (causal self-attention + GELU MLP).

Attention is spelled out with matmul/softmax/masked_fill rather than
``nn.MultiheadAttention`` or SDPA, so a compiler sees the individual ops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ember_zoo.registry import CaseParts


@dataclass(frozen=True)
class BlockConfig:
    batch: int
    seq: int
    dim: int
    heads: int
    mlp_ratio: int = 4


CONFIGS = {
    "tiny": BlockConfig(batch=2, seq=8, dim=32, heads=4),
    "real": BlockConfig(batch=4, seq=128, dim=768, heads=12),
}


class SelfAttention(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.head_dim = cfg.dim // cfg.heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        # True above the diagonal = positions a query must not attend to.
        mask = torch.ones(cfg.seq, cfg.seq, dtype=torch.bool).triu(1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        # (b, t, d) -> (b, heads, t, head_dim)
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.causal_mask[:t, :t], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, d)
        return self.proj(out)


class MLPBlock(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.dim, cfg.mlp_ratio * cfg.dim)
        self.fc2 = nn.Linear(cfg.mlp_ratio * cfg.dim, cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.mlp = MLPBlock(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, target)


def make(size: str) -> CaseParts:
    cfg = CONFIGS[size]
    model = TransformerBlock(cfg)
    x = torch.randn(cfg.batch, cfg.seq, cfg.dim)
    target = torch.randn(cfg.batch, cfg.seq, cfg.dim)
    return CaseParts(model=model, inputs=(x,), kwargs={}, loss_fn=_loss, targets=(target,))
