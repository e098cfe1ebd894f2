"""The default partitioner: the forward computes what its outputs need and saves every
forward value the backward uses; nothing is recomputed."""

from __future__ import annotations

import operator

from ember_aot_autograd.joint import JointGraph
from ember_aot_autograd.partition.common import (
    Partition,
    ancestors,
    build_partition,
    joint_parts,
)


def default_partition(joint: JointGraph) -> Partition:
    primals, _tangents, fw_outputs, grad_outputs = joint_parts(joint)
    forward = ancestors(fw_outputs, set()) | set(primals)
    # multi-output ops: their items are taken in the forward (a tuple cannot be saved)
    forward |= {u for n in list(forward) for u in n.users if u.target is operator.getitem}
    backward = ancestors(grad_outputs, forward) - forward
    saved = {node for node in forward if any(user in backward for user in node.users)}
    saved |= {g for g in grad_outputs if g in forward}  # a gradient the forward computed
    return build_partition(joint, saved, "default")
