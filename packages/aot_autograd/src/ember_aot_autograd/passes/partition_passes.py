"""Passes over a partition (forward and backward graphs), run right after the partitioner.

A backend that rewrites what the partitioner produced (the umbrella keeps saved activations
in the layout its code generator computes them in) hands aot a `PartitionPass`; aot composes
it with the partitioner into one `PartitionFn` and knows nothing else of the backend. The
composition's `name` names the partitioner and every pass (with what each pass's decision
reads), so an artifact store may key compiled variants by it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ember_aot_autograd.joint import JointGraph
from ember_aot_autograd.partition.common import Partition

__all__ = ["PartitionPass", "PassedPartition", "partitioner_name"]


class PartitionPass(Protocol):
    """`name`: what the pass is and what its decisions read; called with the partition, it
    returns the partition to compile (rewritten in place or new)."""

    name: str

    def __call__(self, partition: Partition) -> Partition: ...


def partitioner_name(partition_fn: Callable) -> str:
    """A partitioner's stable name: its `name` where it has one, else module.qualname."""
    name = getattr(partition_fn, "name", None)
    if isinstance(name, str):
        return name
    return f"{partition_fn.__module__}.{partition_fn.__qualname__}"


class PassedPartition:
    """`partition_fn`, then each pass in order: a PartitionFn for aot_module."""

    def __init__(
        self, partition_fn: Callable[[JointGraph], Partition], passes: Sequence[PartitionPass]
    ) -> None:
        self.partition_fn = partition_fn
        self.passes = tuple(passes)
        self.name = " + ".join([partitioner_name(partition_fn), *(p.name for p in self.passes)])

    def __call__(self, joint: JointGraph) -> Partition:
        partition = self.partition_fn(joint)
        for partition_pass in self.passes:
            partition = partition_pass(partition)
        return partition

    def __repr__(self) -> str:
        return f"PassedPartition({self.name})"
