"""Batched matmuls over a handful of products per element become loop IR (a multiply and a
sum over K), on targets that ask (``Target.loop_matmul_max_k``).

TNT's pixel attention has heads of 6 values: ``q @ k^T`` over [16, 6] x [6, 16] matrices,
batched 24 576 times at batch 128. A library GEMM runs its tile machinery for six products
an element (cuBLAS's unaligned kernel, 1.3 ms a block on the H200), where a reduction kernel
reads both operands once and writes the scores. As loop IR the product also becomes a
reduction the scheduler can place beside its neighbours. The sum runs in float32 and is
rounded once to the result's dtype, as a half-precision GEMM accumulates.
"""

from __future__ import annotations

import logging

import torch
import torch.fx

from .matmul_batching import _fake, _prim, _val

log = logging.getLogger("ember.fusion")


def _small(node: torch.fx.Node, max_k: int) -> bool:
    a, b, out = _val(node.args[0]), _val(node.args[1]), _val(node)
    if a is None or b is None or out is None or node.kwargs:
        return False
    sizes = [*a.shape, *b.shape]
    if not all(isinstance(s, int) for s in sizes) or a.dim() != 3:
        return False
    return a.shape[2] <= max_k and a.dtype == b.dtype and a.dtype.is_floating_point


def _rewrite(graph: torch.fx.Graph, bmm: torch.fx.Node) -> None:
    prims = torch.ops.ember_prims
    a, b = bmm.args
    av, bv = _val(a), _val(b)
    batch, rows, k = (int(s) for s in av.shape)
    cols = int(bv.shape[2])
    out_dtype = _val(bmm).dtype
    wide = torch.float32 if out_dtype in (torch.bfloat16, torch.float16) else out_dtype
    shape = [batch, rows, cols, k]

    def add(fn, *args):
        node = graph.call_function(fn, args)
        node.meta["val"] = _fake(
            fn, *[_val(x) if isinstance(x, torch.fx.Node) else x for x in args]
        )
        return node

    with graph.inserting_before(bmm):
        left, right = a, add(prims.permute.default, b, [0, 2, 1])
        if wide != av.dtype:
            left = add(prims.convert_element_type.default, left, wide)
            right = add(prims.convert_element_type.default, right, wide)
        left = add(prims.broadcast_in_dim.default, left, shape, [0, 1, 3])
        right = add(prims.broadcast_in_dim.default, right, shape, [0, 2, 3])
        total = add(prims.sum.default, add(prims.mul.default, left, right), [3])
        if wide != out_dtype:
            total = add(prims.convert_element_type.default, total, out_dtype)
    bmm.replace_all_uses_with(total)
    graph.erase_node(bmm)
    log.info("bmm of K=%d over [%d, %d, %d] as a reduction", k, batch, rows, cols)


def small_matmuls_as_loops(gm: torch.fx.GraphModule, max_k: int) -> torch.fx.GraphModule:
    """``gm``, or a GraphModule over a rewritten copy of its graph (same attributes) where
    each ``bmm`` whose operands meet over at most ``max_k`` products is a multiply and a
    sum."""
    if not any(_prim(n) == "bmm" and _small(n, max_k) for n in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    env = graph.graph_copy(gm.graph, {})
    graph.output(env)
    for node in list(graph.nodes):
        if _prim(node) == "bmm" and _small(node, max_k):
            _rewrite(graph, node)
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


__all__ = ["small_matmuls_as_loops"]
