"""Bisect a GPU mismatch of the zoo transformer block (real size) into its parts; each part is
compiled alone through the Triton target and compared with eager; sources of failing parts are
written to $OUT."""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

import ember
import ember.backends.prim_stages as inductor  # where the stages call _finish
import ember_zoo

OUT = os.environ.get("OUT", "/tmp")
sources: list[str] = []
_finish = inductor._finish


def keep_source(compiled, target, settings, kind):
    sources.append(
        getattr(compiled, "triton_source", "")
        + "\n#----\n"
        + getattr(compiled, "wrapper_source", "")
    )
    return _finish(compiled, target, settings, kind)


inductor._finish = keep_source
case = ember_zoo.build("transformer_block", "real", device="cuda")
block = case.model
x = case.example_inputs[0]
attn = block.attn
b, t, d = x.shape
mask = attn.causal_mask[:t, :t]
q = torch.randn(b, 12, t, 64, device="cuda")
k = torch.randn(b, 12, t, 64, device="cuda")
scores = torch.randn(b, 12, t, t, device="cuda")


def masked_softmax(s):
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)


def scores_fn(q, k):
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(64)


parts = {
    "ln1": (block.ln1, (x,)),
    "masked_softmax": (masked_softmax, (scores,)),
    "scores": (scores_fn, (q, k)),
    "attn": (attn, (x,)),
    "mlp": (block.mlp, (x,)),
    "gelu": (lambda a: F.gelu(a), (torch.randn(512, 3072, device="cuda"),)),
    "block": (block, (x,)),
}
with torch.no_grad():
    for name, (fn, args) in parts.items():
        ember.reset()
        sources.clear()
        got = ember.compile(fn)(*args)
        exp = fn(*args)
        diff = (got - exp).abs().max().item()
        print(f"{name:16s} max abs diff {diff:.3g} kernels={ember.counters['inductor']['kernels']}")
        if not diff < 1e-3:
            with open(os.path.join(OUT, f"debug_{name}.py"), "w") as f:
                f.write("\n\n".join(sources))
