"""CUDA attention of symbolic size as an explicit kernel call, before aot traces the graph.

`F.scaled_dot_product_attention` is a C++ composite: on CUDA it picks a kernel, then shapes
the mask for it. For the memory-efficient kernel it expands the mask and pads its last dim
to an aligned width when the strides are not multiples of the alignment. Traced by aot on
fakes of symbolic size, those branches become guards on the sequence length
(`Eq(Mod(s0*(s0 - Mod(s0, 8) + 8), 16), 0)` on an H100 for GPT-2's and Llama's masks): one
graph per residue class of the length, a recompile after another until the cache limit.

Here such a call is rewritten, where aten picks the memory-efficient kernel for the call's
sizes (asked on static twins, as the tracer's example value is, ember_bytecode_tracer's
example_rules), into the calls the composite makes without the branches: a boolean mask
becomes the additive bias, the bias is expanded to (B, H, L, S), and the kernel op is called
on it. The kernel's alignment is the prim's business at run time (ember_primops.attention's
`kernel_bias` copies a misaligned bias into an aligned buffer, as eager's padding does), so
the values are eager's. Other kernels take no mask padding and keep the plain call.
"""

from __future__ import annotations

import logging

import torch
import torch.fx
import torch.nn.functional as F

from ember_bytecode_tracer.example_rules import EFFICIENT, SDPA_PARAMS, symbolic_cuda_attention

log = logging.getLogger("ember.dynamic")

_SDPA_TARGETS = {F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}


def efficient_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """`F.scaled_dot_product_attention` through aten's memory-efficient CUDA kernel, the mask
    shaped as the composite shapes it for that kernel, without branching on sizes."""
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:  # True attends: 0 where kept, -inf where masked
            zero = torch.zeros((), dtype=query.dtype, device=query.device)
            attn_mask = zero.masked_fill(attn_mask.logical_not(), float("-inf"))
        attn_mask = attn_mask.expand(query.size(0), query.size(1), query.size(2), key.size(2))
    log_sumexp = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, log_sumexp, dropout_p, is_causal, scale=scale
    )
    return out[0]


def _example(arg: object) -> object:
    return arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else arg


def explicit_cuda_attention(gm: torch.fx.GraphModule) -> int:
    """Rewrites, in place, the sdpa calls of `gm` on CUDA fakes of symbolic size for which
    aten picks the memory-efficient kernel into `efficient_attention` calls; returns how
    many. Calls whose example values are missing, static or on another device stay."""
    rewritten = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _SDPA_TARGETS:
            continue
        args = tuple(_example(a) for a in node.args)
        kwargs = {k: _example(v) for k, v in node.kwargs.items()}
        call = symbolic_cuda_attention(args, kwargs)
        if call is None or call.backend != EFFICIENT or call.bound["enable_gqa"]:
            continue
        bound = dict(zip(SDPA_PARAMS, node.args, strict=False))
        bound.update(node.kwargs)
        bound.pop("enable_gqa", None)
        node.target = efficient_attention
        node.args = ()
        node.kwargs = bound
        rewritten += 1
    if rewritten:
        gm.recompile()
        log.debug(
            "%d CUDA sdpa call(s) of symbolic size as memory-efficient kernel calls", rewritten
        )
    return rewritten
