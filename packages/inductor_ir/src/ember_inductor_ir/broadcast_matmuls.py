"""A matmul whose left operand is a broadcast runs on the rows that differ, once.

ConViT's gated positional attention projects a table of relative positions shared by the
whole batch, ``pos_proj(rel_indices.expand(B, -1, -1, -1))``: a Linear layer over a [1, N, N,
3] table expanded to [B, N, N, 3]. Eager (and a lowering that follows it) copies the table B
times and multiplies every copy: at batch 64 and N = 196, a 2.5 M x 3 by 3 x 16 product in
cuBLAS's unaligned kernel (K = 3), 0.27 ms a block on the H200, and a 79 MB result its softmax
reads back. Every row of that product is one of the table's rows times the weight, so the
product of the table alone (1/B of the work), broadcast over the batch, is the same value;
its readers read the broadcast through their index (a stride-0 batch), not a copy.

The pattern, in prims: ``mm(flatten(f(broadcast_in_dim(x))), w)`` (or ``addmm`` with a 1-d
bias), where ``flatten`` folds every dim but the last into the rows (``collapse_view`` or a
2-d ``reshape``) and ``f`` is a chain of clones and dtype conversions (autocast's cast of the
expanded input), and the broadcast keeps the last dim (the reduced one) as it is.
"""

from __future__ import annotations

import logging
import math

import torch
import torch.fx

from .matmul_batching import _fake, _prim, _val

log = logging.getLogger("ember.fusion")

#: ops between the broadcast and the flatten that commute with it (applied to the table)
_PASS_THROUGH = frozenset({"clone", "convert_element_type", "view_of"})


def _flattened(node: torch.fx.Node) -> torch.fx.Node | None:
    """The tensor ``node`` folds into [rows, last dim], if it is such a flatten."""
    prim, val = _prim(node), _val(node)
    if prim not in ("collapse_view", "reshape") or val is None or val.dim() != 2:
        return None
    source = node.args[0]
    shape = _val(source).shape if _val(source) is not None else None
    if shape is None or len(shape) < 2 or shape[-1] != val.shape[1]:
        return None
    if prim == "collapse_view" and list(node.args[1:3]) == [0, len(shape) - 1]:
        return source
    if prim == "reshape" and list(node.args[1]) == [math.prod(shape[:-1]), shape[-1]]:
        return source
    return None


def _broadcast_rows(left: torch.fx.Node):
    """(table, chain of pass-through ops, broadcast node) when ``left`` flattens a broadcast
    of ``table`` that repeats its rows and keeps its last dim, else None."""
    node = _flattened(left)
    chain: list[torch.fx.Node] = []
    while node is not None and _prim(node) in _PASS_THROUGH and len(node.users) == 1:
        chain.append(node)
        node = node.args[0]
    if node is None or _prim(node) != "broadcast_in_dim" or len(node.users) != 1:
        return None
    table, shape, bdims = node.args[0], list(node.args[1]), list(node.args[2])
    small, wide = _val(table), _val(node)
    if small is None or wide is None or small.dim() == 0:
        return None
    sizes = [*small.shape, *wide.shape]
    if not all(isinstance(s, int) for s in sizes):
        return None  # symbolic sizes: left as they are
    if bdims[-1] != len(shape) - 1 or small.shape[-1] != shape[-1]:
        return None  # the reduced dim itself broadcast
    if small.numel() >= wide.numel():
        return None
    return table, list(reversed(chain)), node


def _rewrite(graph: torch.fx.Graph, mm: torch.fx.Node) -> bool:
    prim = _prim(mm)
    left_at = 0 if prim == "mm" else 1
    if prim == "addmm" and (_val(mm.args[0]) is None or _val(mm.args[0]).dim() != 1):
        return False  # a bias per row would need broadcasting too
    found = _broadcast_rows(mm.args[left_at])
    if found is None or mm.kwargs:
        return False
    table, chain, broadcast = found
    prims = torch.ops.ember_prims
    small = _val(table)
    rows, k = small.numel() // small.shape[-1], int(small.shape[-1])
    columns = int(_val(mm).shape[1])
    wide_shape = [*list(broadcast.args[1])[:-1], columns]
    steps: list[tuple] = []  # (op, args after the input) applied to the table, in order
    for op in chain:
        if _prim(op) == "convert_element_type":
            steps.append((prims.convert_element_type.default, (op.args[1],)))
    steps += [(prims.reshape.default, ([rows, k],))]
    with graph.inserting_before(mm):
        value, val = table, small
        for fn, rest in steps:
            val = _fake(fn, val, *rest)
            value = graph.call_function(fn, (value, *rest))
            value.meta["val"] = val
        args = list(mm.args)
        args[left_at] = value
        product = graph.call_function(mm.target, tuple(args))
        product.meta["val"] = _fake(
            mm.target, *[_val(a) if _val(a) is not None else a for a in args]
        )
        shaped = [*small.shape[:-1], columns]
        unflat = graph.call_function(prims.reshape.default, (product, shaped))
        unflat.meta["val"] = _fake(prims.reshape.default, product.meta["val"], shaped)
        bdims = list(broadcast.args[2])
        wide = graph.call_function(prims.broadcast_in_dim.default, (unflat, wide_shape, bdims))
        wide.meta["val"] = _fake(
            prims.broadcast_in_dim.default, unflat.meta["val"], wide_shape, bdims
        )
        flat_shape = [math.prod(wide_shape[:-1]), columns]
        flat = graph.call_function(prims.reshape.default, (wide, flat_shape))
        flat.meta["val"] = _fake(prims.reshape.default, wide.meta["val"], flat_shape)
    dead = [mm.args[left_at], *reversed(chain), broadcast]
    mm.replace_all_uses_with(flat)
    graph.erase_node(mm)
    for node in dead:
        if not node.users:
            graph.erase_node(node)
    log.info("%s over a broadcast of %s runs on its %d distinct rows", prim, table, rows)
    return True


def matmuls_over_broadcast_rows(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a GraphModule over a rewritten copy of its graph (same attributes) where
    each matmul over a broadcast's repeated rows multiplies the distinct rows once."""
    candidates = [
        n for n in gm.graph.nodes if _prim(n) in ("mm", "addmm") and _broadcast_rows(
            n.args[0 if _prim(n) == "mm" else 1]) is not None
    ]  # fmt: skip
    if not candidates:
        return gm
    graph = torch.fx.Graph()
    env = graph.graph_copy(gm.graph, {})
    graph.output(env)
    changed = False
    for node in list(graph.nodes):
        if _prim(node) in ("mm", "addmm"):
            changed |= _rewrite(graph, node)
    if not changed:
        return gm
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


__all__ = ["matmuls_over_broadcast_rows"]
