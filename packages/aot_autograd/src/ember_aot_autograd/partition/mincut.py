"""The min-cut rematerialization partitioner: saves the cheapest set of forward values from
which the backward can recompute what it needs, recomputing cheap ops instead of saving them.

Each forward value the backward depends on becomes an edge of capacity "its bytes" in a flow
network (node in -> node out); data dependencies have infinite capacity; graph inputs are
free to keep; ops that must not run twice (expensive ones, random ones) are tied to the
source, so they run in the forward only. A minimum source/sink cut then names the values to
save: everything on the sink side of the cut is recomputed in the backward. Values of
activation-checkpointed regions (regions.py) cannot be saved: they are recomputed, whatever
they cost.
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
        "gather",
        "index",
        "index_select",
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
        "roll",
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
        # reads at computed positions, as cheap as a pointwise op's: a max pool's backward
        # then recomputes its per-input hits from the saved int8 window offsets, where it
        # saved four bool masks over the pool's input (ResNet-50's stem: 411 MB)
        "gather",
        "index",
        "index_select",
    )
}


#: ops that read their operands from memory (library kernels: matmuls, convolutions and their
#: gradients, attention), never fused with the loop IR's kernels: a value one of them reads in
#: the backward is written there in full if the backward recomputes it
_READ_FROM_MEMORY: set[str] = {
    f"aten::{name}"
    for name in (
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "convolution",
        "convolution_backward",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_cudnn_attention_backward",
    )
} | {
    f"ember_prims::{name}"
    for name in (
        "mm",
        "bmm",
        "addmm",
        "convolution",
        "convolution_backward",
        "scaled_dot_product_attention",
        "sdpa_efficient",
        "sdpa_efficient_backward",
        "sdpa_flash_cpu",
        "sdpa_flash_cpu_backward",
        "sdpa_flash_cuda",
        "sdpa_flash_cuda_backward",
    )
}

#: save what a backward library op reads (read_by_backward_library_op) rather than recompute
#: it: the forward wrote the value already for its own library op, so saving costs memory
#: only, while recomputing it reads its inputs and writes it again in the backward. Timed
#: A/B on the H200 (bf16 training, fresh processes base/on/on/base, 2026-12-02 at efb0c8a):
#: ESE-VoVNet 27.2 against 30.2 ms a step (4510 -> 7253 MB, torch.compile holds 7920),
#: ResNet-50 22.3 against 22.8 ms (3019 -> 4971 MB, torch.compile 5159)
SAVE_LIBRARY_OPERANDS = True

#: prims that only rearrange or broadcast their input (followed to the op that reads it)
_REARRANGING = frozenset(
    f"ember_prims::{name}"
    for name in ("reshape", "permute", "broadcast_in_dim", "squeeze", "expand_dims",
                 "collapse_view", "collapse", "split_dim", "view_of", "slice", "as_strided")
)  # fmt: skip


def register_recomputable(qualified_name: str) -> None:
    """Declares an op ("namespace::name") cheap enough to recompute in the backward."""
    _RECOMPUTABLE.add(qualified_name)


def is_recomputable(node: torch.fx.Node) -> bool:
    """Cheap, deterministic ops: pointwise, views, broadcasts, creations. Never random ones,
    matmuls, convolutions or reductions."""
    target = node.target
    if target is operator.getitem:
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and is_recomputable(source)
    if not isinstance(target, OpOverload) or is_random(target):
        return False
    if torch.Tag.pointwise in target.tags or returns_views(target):
        return True
    return target._schema.name in _RECOMPUTABLE


def _schema_name(node: torch.fx.Node) -> str | None:
    target = node.target
    return target._schema.name if isinstance(target, OpOverload) else None


def _rearranges(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, OpOverload) and (
        returns_views(target) or target._schema.name in _REARRANGING
    )


def read_by_backward_library_op(node: torch.fx.Node, backward: set[torch.fx.Node]) -> bool:
    """Whether a backward op that reads its operands from memory (a matmul, a convolution's
    gradient) reads ``node``'s value, directly or through views. Recomputed, such a value
    is computed and written in full again in the backward (a pass over its inputs and a
    write of its own size), where saving it costs only its bytes: the forward wrote it
    already when its own library op read it (ESE-VoVNet recomputed each concatenation and
    each batch norm + ReLU for its convolution's weight gradient: 35 kernels, 5 ms a step)."""
    work, seen = [node], set()
    while work:
        for user in work.pop().users:
            if user in seen:
                continue
            seen.add(user)
            if user in backward and _schema_name(user) in _READ_FROM_MEMORY:
                return True
            if _rearranges(user):
                work.append(user)
    return False


def min_cut_rematerialization_partition(
    joint: JointGraph, *, recomputable: Callable[[torch.fx.Node], bool] = is_recomputable
) -> Partition:
    primals, tangents, fw_outputs, grad_outputs = joint_parts(joint)
    from_tangents = descendants(tangents)
    needed = ancestors(grad_outputs, set())
    # forward values the backward reads directly
    boundary = {
        u for n in needed & from_tangents for u in n.all_input_nodes if u not in from_tangents
    } | {g for g in grad_outputs if g is not None and g not in from_tangents}
    region = ancestors(boundary, set())
    # free to save: inputs, constants, and sizes (ints; a backward that recomputed a size
    # would need the tensor it was read from)
    free = set(primals) | {n for n in region if n.op == "get_attr" or is_size_node(n)}
    # values of checkpointed regions: recomputed, whatever they cost (regions.py)
    # and their boundaries, saved (regions.py)
    forward = ancestors(fw_outputs, set())
    unsaveable = {n for n in region if must_recompute(n, forward)}
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
            and (
                node in boundary_values
                or not recomputable(node)
                or (
                    SAVE_LIBRARY_OPERANDS
                    and not _rearranges(node)
                    and read_by_backward_library_op(node, from_tangents)
                )
            )
        ):
            network.add_edge("source", into)
        for user in node.users:
            if user in region:
                network.add_edge(out, ("in", user))
        if node in boundary:
            network.add_edge(out, "sink")
    if not boundary:
        return build_partition(joint, set(), "min_cut")
    cut_value, (source_side, _) = nx.minimum_cut(network, "source", "sink")
    if cut_value == float("inf"):
        log.warning("min-cut partition found no finite cut; using the default partition")
        return default_partition(joint)
    saved = {n for n in region if ("in", n) in source_side and ("out", n) not in source_side}
    return build_partition(joint, saved, "min_cut")
