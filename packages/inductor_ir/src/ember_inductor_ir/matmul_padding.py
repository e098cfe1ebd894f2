"""Matmul dims padded to the width a GPU library's fast kernels need.

cuBLAS picks its kernel by the product's sizes as well as its strides: a bf16 product with a
dim that is not a multiple of 8 elements (16 bytes) runs in a kernel for unaligned operands.
Bart's LM head, [4096, 1024] by [1024, 50265] (its vocabulary is odd), takes 4.46 ms on the
H200 so; the same product with the weight padded to 50272 columns, its result sliced back,
takes 0.57 ms, and a padded output stride alone changes nothing (tools/gpu/mm_alignment.py).

So a large enough ``mm``/``addmm`` whose M, K or N is unaligned multiplies zero-padded
operands and returns the slice of its result that the unpadded product would be: zeros
added along K add nothing, rows and columns added along M and N are cut off. The pad is a
loop-IR pointwise that fuses into the operand's producer (autocast's cast of the weight);
an operand padded twice the same way (a transposed gradient read by two products) is padded
once. The result keeps the padded row stride, in the graph's outputs too (the slice is a
view; torch.compile returns its padded logits so as well).
"""

from __future__ import annotations

import logging
import math

import torch
import torch.fx

from .matmul_batching import _fake, _prim, _val

log = logging.getLogger("ember.fusion")

#: a product smaller than this many multiply-adds is left alone: the unaligned kernel costs
#: little there and the padded copies of an operand that cannot fuse would cost more
MIN_WORK = 1 << 30
#: a dim shorter than this is left alone (padding K = 3 to 8 nearly triples an operand)
MIN_DIM = 64

_FLOATS = (torch.bfloat16, torch.float16, torch.float32)


def _padded(n: int, multiple: int) -> int:
    return n if n < MIN_DIM else -(-n // multiple) * multiple


class _Padder:
    """Inserts pads before the graph's matmuls, one per (tensor, padding) pair."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        self.made: dict[tuple, torch.fx.Node] = {}
        self.prims = torch.ops.ember_prims

    def pad(self, node: torch.fx.Node, high: list[int], before: torch.fx.Node) -> torch.fx.Node:
        if not any(high):
            return node
        # a transpose's pad is the transpose of its source's pad: shared by the products
        # reading the tensor and its transpose (a gradient's two matmuls)
        if _prim(node) == "permute" and len(high) == 2 and list(node.args[1]) == [1, 0]:
            inner = self.pad(node.args[0], high[::-1], before)
            return self.make(self.prims.permute.default, (inner, [1, 0]), before)
        key = (node, tuple(high))
        if key not in self.made:
            zeros = [0] * len(high)
            self.made[key] = self.make(
                self.prims.pad.default, (node, 0.0, zeros, list(high), zeros), before
            )
        return self.made[key]

    def make(self, op, args: tuple, before: torch.fx.Node) -> torch.fx.Node:
        vals = tuple(_val(a) if isinstance(a, torch.fx.Node) else a for a in args)
        with self.graph.inserting_before(before):
            node = self.graph.call_function(op, args)
        node.meta["val"] = _fake(op, *vals)
        return node


def _sizes(mm: torch.fx.Node) -> tuple[int, int, int] | None:
    prim = _prim(mm)
    a, b = (mm.args[0], mm.args[1]) if prim == "mm" else (mm.args[1], mm.args[2])
    av, bv, out = _val(a), _val(b), _val(mm)
    if av is None or bv is None or out is None or mm.kwargs:
        return None
    shape = (*av.shape, *bv.shape)
    if not all(isinstance(s, int) for s in shape) or out.dtype not in _FLOATS:
        return None
    if av.dtype != out.dtype or bv.dtype != out.dtype:
        return None
    return int(av.shape[0]), int(av.shape[1]), int(bv.shape[1])


def _bias_high(bias: torch.fx.Node, m: int, n: int, pm: int, pn: int) -> list[int] | None:
    """The bias's padding for an [m, n] -> [pm, pn] product (a broadcast dim: none)."""
    val = _val(bias)
    if val is None:
        return None
    shape = [int(s) for s in val.shape]
    if len(shape) == 1:
        return [pn - n if shape[0] == n else 0]
    if len(shape) == 2:
        return [pm - m if shape[0] == m else 0, pn - n if shape[1] == n else 0]
    return None


def _retrace_views(node: torch.fx.Node) -> None:
    """The views of ``node`` (a reshape of the product to [batch, seq, vocab]) see its
    padded strides: their recorded values follow, so that an output returns the view itself
    instead of a copy with eager's strides. (A prim reshape records a contiguous copy; its
    lowering is an index map, so it is recorded as the view aten's reshape would make.)"""
    for user in list(node.users):
        op = user.target
        if not isinstance(op, torch._ops.OpOverload):
            continue
        vals = [_val(a) if isinstance(a, torch.fx.Node) else a for a in user.args]
        if _prim(user) == "reshape":
            new = _fake(torch.Tensor.reshape, *vals)
        elif op._schema.returns and op._schema.returns[0].alias_info is not None:
            new = _fake(op, *vals)
        else:
            continue
        if isinstance(new, torch.Tensor):
            user.meta["val"] = new
            _retrace_views(user)


def _drop_if_unread(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """An operand only the padded matmul read (the weight's transpose) goes: a second
    reader of its source would make the source a buffer of its own."""
    op = node.target
    if node.op != "call_function" or node.users or not isinstance(op, torch._ops.OpOverload):
        return
    if op._schema.is_mutable:
        return
    sources = [a for a in node.args if isinstance(a, torch.fx.Node)]
    graph.erase_node(node)
    for source in sources:
        _drop_if_unread(graph, source)


def _rewrite(padder: _Padder, mm: torch.fx.Node, alignment_bytes: int) -> bool:
    sizes = _sizes(mm)
    if sizes is None or math.prod(sizes) < MIN_WORK:
        return False
    m, k, n = sizes
    multiple = max(1, alignment_bytes // _val(mm).dtype.itemsize)
    pm, pk, pn = (_padded(d, multiple) for d in sizes)
    if (pm, pk, pn) == sizes:
        return False
    prim, prims = _prim(mm), torch.ops.ember_prims
    if prim == "addmm":
        bias_high = _bias_high(mm.args[0], m, n, pm, pn)
        if bias_high is None:
            return False
    a_at = 0 if prim == "mm" else 1
    a = padder.pad(mm.args[a_at], [pm - m, pk - k], mm)
    b = padder.pad(mm.args[a_at + 1], [pk - k, pn - n], mm)
    args = (a, b) if prim == "mm" else (padder.pad(mm.args[0], bias_high, mm), a, b)
    product = padder.make(mm.target, args, mm)
    result = padder.make(prims.slice.default, (product, [0, 0], [m, n]), mm)
    log.debug("matmul_padding: %s [%d, %d] x [%d, %d] padded to K=%d, M=%d, N=%d",
              mm.name, m, k, k, n, pk, pm, pn)  # fmt: skip
    operands = [a for a in mm.args if isinstance(a, torch.fx.Node)]
    mm.replace_all_uses_with(result)
    padder.graph.erase_node(mm)
    for operand in operands:
        _drop_if_unread(padder.graph, operand)
    _retrace_views(result)
    return True


def pad_matmul_dims(gm: torch.fx.GraphModule, alignment_bytes: int) -> torch.fx.GraphModule:
    """``gm`` with its large unaligned 2-d matmuls on padded operands (module docstring);
    the same module, changed in place, or as it was when none qualifies."""
    if alignment_bytes <= 1:
        return gm
    padder = _Padder(gm.graph)
    candidates = [n for n in gm.graph.nodes if _prim(n) in ("mm", "addmm")]
    if sum(_rewrite(padder, mm, alignment_bytes) for mm in candidates):
        gm.graph.lint()
        gm.recompile()
    return gm


__all__ = ["MIN_DIM", "MIN_WORK", "pad_matmul_dims"]
