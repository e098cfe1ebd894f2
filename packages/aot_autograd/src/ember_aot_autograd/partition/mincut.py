"""The min-cut rematerialization partitioner: saves the cheapest set of forward values from
which the backward can recompute what it needs, recomputing cheap ops instead of saving them.

Each forward value the backward depends on becomes an edge of capacity "its bytes" in a flow
network (node in -> node out); data dependencies have infinite capacity; graph inputs are
free to keep; ops that must not run twice (expensive ones, random ones) are tied to the
source, so they run in the forward only. A minimum source/sink cut then names the values to
save: everything on the sink side of the cut is recomputed in the backward. Values of
activation-checkpointed regions (regions.py) cannot be saved: they are recomputed, whatever
they cost.

Bytes alone favour long recompute chains: a stack of residual blocks whose float32 sums the
backward can rebuild from the first sum and each block's bfloat16 branch saves half the
bytes of saving the sums. But the backward then rebuilds the last sum, and so every sum,
before its first op, and holds each until its own block's gradient reads it: the sums are
as alive as if saved, on top of the branches that were. So a chain of recomputed ops is
bounded (MAX_RECOMPUTE_CHAIN ops; views and casts count nothing): where one grows past the
bound, the last value on it that several recomputed values read (a residual sum) is
computed in the forward instead, and the cut is solved again. The backward places each
recomputed value just before its first use (common.recompute_late).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable

import networkx as nx
import torch
import torch.fx
from torch._ops import OpOverload

from ember_aot_autograd.joint import JointGraph
from ember_aot_autograd.op_kinds import is_random, returns_views
from ember_aot_autograd.partition.common import (
    Partition,
    ancestors,
    build_partition,
    descendants,
    is_size_node,
    joint_parts,
    value_bytes,
)
from ember_aot_autograd.partition.default import default_partition
from ember_aot_autograd.regions import must_recompute, region_boundary

log = logging.getLogger("ember.aot")

# cheap ops without the pointwise tag, by "namespace::name"; prims by their contract names
_RECOMPUTABLE: set[str] = {
    f"aten::{name}"
    for name in (
        "expand",
        "clone",
        "_to_copy",
        "copy",
        "full",
        "full_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "empty_like",
        "empty_strided",
        "scalar_tensor",
        "where",
        "masked_fill",
        "fill",
        "_unsafe_view",
        "lift_fresh_copy",
        "threshold_backward",
        "slice_scatter",
        "select_scatter",
        "as_strided_scatter",
        "cat",
        "constant_pad_nd",
        # one pass over a row each: recomputed from a bf16 input, a float32 (log-)softmax
        # over logits or attention scores is not saved at twice the bytes
        "_log_softmax",
        "_softmax",
    )
} | {
    f"ember_prims::{name}"
    for name in (
        "broadcast_in_dim",
        "squeeze",
        "expand_dims",
        "permute",
        "slice",
        "as_strided",
        "split_dim",
        "collapse_view",
        "reshape",
        "collapse",
        "convert_element_type",
        "where",
        "full",
        "scalar_tensor",
        "iota",
        "clone",
        "cat",
        "slice_scatter",
        "pad",
        "rev",
        "abs",
        "neg",
        "add",
        "sub",
        "mul",
        "div",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "erf",
        "tanh",
        "sigmoid",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "pow",
        "reciprocal",
        "sin",
        "cos",
        "logical_not",
        "logical_and",
        "logical_or",
        "fma",
    )
}


def register_recomputable(qualified_name: str) -> None:
    """Declares an op ("namespace::name") cheap enough to recompute in the backward."""
    _RECOMPUTABLE.add(qualified_name)


def is_recomputable(node: torch.fx.Node) -> bool:
    """Cheap, deterministic ops: pointwise, views, broadcasts, creations, row-wise softmax.
    Never random ones, matmuls, convolutions or other reductions."""
    target = node.target
    if target is operator.getitem:
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and is_recomputable(source)
    if not isinstance(target, OpOverload) or is_random(target):
        return False
    if torch.Tag.pointwise in target.tags or returns_views(target):
        return True
    return target._schema.name in _RECOMPUTABLE


#: the longest chain of ops the backward may recompute from saved values; a value further
#: away is saved instead (see `_long_chains`)
MAX_RECOMPUTE_CHAIN = 8


def min_cut_rematerialization_partition(
    joint: JointGraph, *, recomputable: Callable[[torch.fx.Node], bool] = is_recomputable
) -> Partition:
    _, tangents, fw_outputs, grad_outputs = joint_parts(joint)
    from_tangents = descendants(tangents)
    needed = ancestors(grad_outputs, set())
    # forward values the backward reads directly
    boundary = {
        u for n in needed & from_tangents for u in n.all_input_nodes if u not in from_tangents
    } | {g for g in grad_outputs if g is not None and g not in from_tangents}
    if not boundary:
        return build_partition(joint, set(), "min_cut")
    region = ancestors(boundary, set())
    # values of checkpointed regions: recomputed, whatever they cost (regions.py)
    forward = ancestors(fw_outputs, set())
    unsaveable = {n for n in region if must_recompute(n, forward)}
    network = _flow_network(joint, region, boundary, unsaveable, recomputable)
    # a chain of recomputed ops is bounded: the backward would otherwise rebuild values far
    # from what it saved (a transformer's residual sums, each from the one before, all at
    # the start of the backward); the first value past the bound is computed in the forward
    # and the cut is solved again, a few rounds at most
    for _ in range(4):
        cut_value, (source_side, _) = nx.minimum_cut(network, "source", "sink")
        if cut_value == float("inf"):
            log.warning("min-cut partition found no finite cut; using the default partition")
            return default_partition(joint)
        recomputed = [
            n for n in joint.gm.graph.nodes if n in region and ("in", n) not in source_side
        ]
        too_far = _long_chains(recomputed, unsaveable)
        if not too_far:
            break
        network.add_edges_from(("source", ("in", n)) for n in too_far)
    saved = {n for n in region if ("in", n) in source_side and ("out", n) not in source_side}
    return build_partition(joint, saved, "min_cut")


def _flow_network(joint, region, boundary, unsaveable, recomputable) -> nx.DiGraph:
    """Each value an edge of capacity "its bytes" (in -> out); data dependencies of infinite
    capacity; values that cannot be recomputed tied to the source."""
    primals, _, fw_outputs, _ = joint_parts(joint)
    # free to save: inputs, constants, and sizes (ints; a backward that recomputed a size
    # would need the tensor it was read from)
    free = set(primals) | {n for n in region if n.op == "get_attr" or is_size_node(n)}
    # and their boundaries, saved (regions.py)
    forward = ancestors(fw_outputs, set())
    boundary_values = {n for n in region if region_boundary(n, forward)}
    network = nx.DiGraph()
    network.add_nodes_from(["source", "sink"])  # a region of factory ops reaches no source
    for node in region:
        into, out = ("in", node), ("out", node)
        if node in free:
            network.add_edge("source", into)
            network.add_edge(into, out, capacity=0)
        elif node in unsaveable or not isinstance(node.meta.get("val"), torch.Tensor):
            network.add_edge(into, out)  # tuples, scalars: cannot be saved as such
        else:
            network.add_edge(into, out, capacity=value_bytes(node))
        if (
            node not in free
            and node not in unsaveable
            and (node in boundary_values or not recomputable(node))
        ):
            network.add_edge("source", into)
        for user in node.users:
            if user in region:
                network.add_edge(out, ("in", user))
        if node in boundary:
            network.add_edge(out, "sink")
    return network


#: ops that add nothing to a recompute chain: a cast is folded into the kernel that reads it
_FREE_IN_CHAINS = {"ember_prims::convert_element_type", "aten::_to_copy"}


def _chain_step(node: torch.fx.Node) -> int:
    """What recomputing `node` adds to a chain: a computed value 1; a view, a cast, an item
    of a tuple, a value made from no tensor 0."""
    target = node.target
    if target is operator.getitem or not node.all_input_nodes:
        return 0
    if not isinstance(target, OpOverload):
        return 1
    return 0 if returns_views(target) or target._schema.name in _FREE_IN_CHAINS else 1


def _long_chains(recomputed: list[torch.fx.Node], unsaveable: set) -> set[torch.fx.Node]:
    """Recomputed values to compute in the forward instead, so that no chain of recomputed
    ops grows past MAX_RECOMPUTE_CHAIN. Where a chain grows past it, the value taken is the
    last one on the chain that several recomputed values read (a residual sum that both the
    next sum and a layer norm read: the chains after it start again from it), or else the
    value where the chain went past the bound."""
    members = set(recomputed)
    too_far: set[torch.fx.Node] = set()
    for _ in recomputed:  # each round takes one more value
        found = _first_long_chain(recomputed, too_far)
        if found is None:
            break
        node, via = found
        cut = node
        while cut is not None and cut not in too_far:  # a taken value ends the chain
            shared = sum(1 for u in cut.users if u in members) > 1
            if shared and _can_save(cut, unsaveable):
                break
            cut = via.get(cut)
        if cut is None or cut in too_far:
            if not _can_save(node, unsaveable):
                break
            cut = node
        too_far.add(cut)
    return too_far


def _can_save(node: torch.fx.Node, unsaveable: set) -> bool:
    return node not in unsaveable and isinstance(node.meta.get("val"), torch.Tensor)


def _first_long_chain(recomputed: list[torch.fx.Node], taken: set):
    """(the first value whose chain of recomputed ops is longer than the bound, and for each
    value the input its longest chain comes through), or None; `taken` values start chains."""
    depth: dict[torch.fx.Node, int] = {}
    via: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in recomputed:
        if node in taken:
            depth[node] = 0
            continue
        inputs = [i for i in node.all_input_nodes if i in depth]
        longest = max(inputs, key=depth.__getitem__, default=None)
        if longest is not None:
            via[node] = longest
        depth[node] = (depth[longest] if longest is not None else 0) + _chain_step(node)
        if depth[node] > MAX_RECOMPUTE_CHAIN:
            return node, via
    return None
