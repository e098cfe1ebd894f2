"""The default partitioner: the forward computes what its outputs need and saves every
forward value the backward uses; nothing is recomputed, except the values of
activation-checkpointed regions (regions.py), which the backward recomputes from the
region's inputs."""

from __future__ import annotations

import operator

from ember_aot_autograd.joint import JointGraph
from ember_aot_autograd.partition.common import (
    Partition,
    ancestors,
    build_partition,
    is_size_node,
    joint_parts,
)
from ember_aot_autograd.regions import must_recompute


def default_partition(joint: JointGraph) -> Partition:
    primals, _tangents, fw_outputs, grad_outputs = joint_parts(joint)
    forward = ancestors(fw_outputs, set()) | set(primals)
    # multi-output ops: their items are taken in the forward (a tuple cannot be saved)
    forward |= {u for n in list(forward) for u in n.users if u.target is operator.getitem}
    # sizes the forward can compute are computed there and saved as ints, rather than
    # saving a tensor only for the backward to read its size
    for node in joint.gm.graph.nodes:
        if is_size_node(node) and all(i in forward for i in node.all_input_nodes):
            forward.add(node)
    forward -= {n for n in forward if must_recompute(n, forward)}  # checkpointed regions
    backward = ancestors(grad_outputs, forward) - forward
    saved = {node for node in forward if any(user in backward for user in node.users)}
    saved |= {g for g in grad_outputs if g in forward}  # a gradient the forward computed
    return build_partition(joint, saved, "default")
