"""Matmuls that read consecutive steps of one tensor through one weight run as one matmul.

An unrolled loop applies the same Linear layer to every step of a sequence: a recurrent
model's input projection ``x[:, t] @ W.T`` is 32 small matmuls, each reading the whole
weight (1.5 MB for a 256 x 1536 projection) to produce 32 rows, and a library call apiece.
When the left operands are the steps ``x[:, 0] ... x[:, n-1]`` of one 3-d tensor, the rows of
``x`` flattened are the left operand of one matmul that reads the weight once, and each
step's product is a strided view of its result. A matmul whose operand depends on another
of the group (the recurrence ``h_t @ U.T``) cannot join it, nor one whose product is summed
into another (a weight's gradient over the steps: add_folds accumulates those in place).

Left operands that are not slices of one tensor (a recurrent state ``h_t``) would need a
concatenation; the loop IR's ``cat`` of many inputs is a chain of masked loads per element
(slower than the calls it saves, measured on the zoo rnn), so those are left alone.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import torch
import torch.fx

from .add_folds import find_folds
from .lowering.registry import prim_name

log = logging.getLogger("ember.fusion")

#: fewer matmuls than this sharing a weight are left alone
MIN_GROUP = 2


def _prim(node: object) -> str:
    is_op = isinstance(node, torch.fx.Node) and node.op == "call_function"
    return (
        prim_name(node.target) if is_op and isinstance(node.target, torch._ops.OpOverload) else ""
    )


def _val(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _weight_key(b: torch.fx.Node) -> tuple:
    """The right operands of one Linear layer applied several times are distinct transposes
    of one parameter: grouped by the parameter."""
    if _prim(b) == "permute" and list(b.args[1]) == [1, 0]:
        return ("transposed", b.args[0])
    return ("as is", b)


def _groups(graph: torch.fx.Graph) -> list[list[torch.fx.Node]]:
    # a product accumulated into a sum runs as addmm_ into the sum (add_folds): kept so
    accumulated = {n for fold in find_folds(graph).values() for n in fold.absorbed}
    groups: dict[tuple, list[torch.fx.Node]] = defaultdict(list)
    for node in graph.nodes:
        if _prim(node) != "mm" or node.kwargs or node in accumulated:
            continue
        a, b = node.args
        if _val(a) is None or _val(b) is None or _val(node) is None:
            continue
        groups[_weight_key(b)].append(node)
    return [g for g in groups.values() if len(g) >= MIN_GROUP]


def _step(node: torch.fx.Node) -> tuple[torch.fx.Node, int, int] | None:
    """(base, dim, index) when ``node`` is ``base[..., index, ...]`` of a 3-d ``base`` (a unit
    ``slice`` along ``dim`` < 2, squeezed), else None."""
    if _prim(node) != "squeeze" or len(node.args[1]) != 1:
        return None
    (dim,) = node.args[1]
    sliced = node.args[0]
    if _prim(sliced) != "slice" or _val(sliced) is None or _val(sliced).dim() != 3:
        return None
    base, start, limit = sliced.args[0], list(sliced.args[1]), list(sliced.args[2])
    strides = list(sliced.args[3]) if len(sliced.args) > 3 and sliced.args[3] else [1, 1, 1]
    shape = list(_val(base).shape) if _val(base) is not None else None
    if dim not in (0, 1) or shape is None or strides != [1, 1, 1]:
        return None
    whole = all(start[d] == 0 and limit[d] == shape[d] for d in range(3) if d != dim)
    if not whole or limit[dim] != start[dim] + 1:
        return None
    return base, dim, start[dim]


def _steps_of_one_base(group: list[torch.fx.Node]) -> tuple[torch.fx.Node, int] | None:
    """(base, dim) when the group's left operands are steps 0, 1, ... n-1 of one base (all
    of its steps along ``dim``) in program order."""
    steps = [_step(mm.args[0]) for mm in group]
    if any(s is None for s in steps):
        return None
    base, dim = steps[0][0], steps[0][1]
    if any(s[0] is not base or s[1] != dim for s in steps):
        return None
    if [s[2] for s in steps] != list(range(int(_val(base).shape[dim]))):
        return None
    return base, dim


def _fake(fn, *args):
    vals = [v for v in torch.utils._pytree.tree_leaves(args) if isinstance(v, torch.Tensor)]
    mode = getattr(vals[0], "fake_mode", None)
    if mode is None:
        return None
    with mode:
        return fn(*args)


def _batch(graph: torch.fx.Graph, group: list[torch.fx.Node], pos: dict) -> bool:
    found = _steps_of_one_base(group)
    if found is None:
        return False
    base, dim = found
    first_reader = min(pos[user] for mm in group for user in mm.users)
    weight = group[0].args[1]
    if pos[base] >= first_reader or pos[weight] >= first_reader:
        return False
    prims = torch.ops.ember_prims
    outer, steps, k = (int(s) for s in _val(base).shape)
    columns = int(_val(group[0]).shape[1])
    flat_val = _fake(prims.reshape.default, _val(base), [outer * steps, k])
    if flat_val is None:
        return False  # no fake-tensor metadata to give the new nodes
    product_val = _fake(prims.mm.default, flat_val, _val(weight))
    rows_val = _fake(prims.reshape.default, product_val, [outer, steps, columns])
    anchor = next(n for n in graph.nodes if pos[n] == first_reader)
    with graph.inserting_before(anchor):
        flat = graph.call_function(prims.reshape.default, (base, [outer * steps, k]))
        product = graph.call_function(prims.mm.default, (flat, weight))
        rows = graph.call_function(prims.reshape.default, (product, [outer, steps, columns]))
    flat.meta["val"], product.meta["val"], rows.meta["val"] = flat_val, product_val, rows_val
    for index, mm in enumerate(group):
        start, limit = [0, 0, 0], [outer, steps, columns]
        start[dim], limit[dim] = index, index + 1
        with graph.inserting_before(anchor):
            sliced = graph.call_function(prims.slice.default, (rows, start, limit, [1, 1, 1]))
            part = graph.call_function(prims.squeeze.default, (sliced, [dim]))
        sliced.meta["val"] = _fake(prims.slice.default, rows_val, start, limit, [1, 1, 1])
        part.meta["val"] = _fake(prims.squeeze.default, sliced.meta["val"], [dim])
        # the step's squeeze and slice and its transposed weight, read by nobody now
        maybe_dead = [mm.args[0], mm.args[0].args[0], mm.args[1]]
        mm.replace_all_uses_with(part)
        graph.erase_node(mm)
        for node in maybe_dead:
            if not node.users and node is not weight and node.op == "call_function":
                graph.erase_node(node)
    log.info("batched %d matmuls over the steps of %s into one", len(group), base)
    return True


def batch_step_matmuls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a GraphModule over a rewritten copy of its graph (same attributes) where
    each group of matmuls over the steps of one tensor with one weight runs as one."""
    if not _groups(gm.graph):
        return gm
    graph = torch.fx.Graph()
    env = graph.graph_copy(gm.graph, {})
    graph.output(env)
    changed = False
    for group in _groups(graph):
        if any(_val(mm).dtype != _val(group[0]).dtype for mm in group):
            continue
        pos = {n: k for k, n in enumerate(graph.nodes)}
        changed |= _batch(graph, sorted(group, key=pos.__getitem__), pos)
    if not changed:
        return gm
    graph.lint()
    return torch.fx.GraphModule(gm, graph)
