"""Partitioners: split a joint graph into a forward and a backward graph."""

from ember_aot_autograd.partition.common import Partition, PartitionReport, build_partition
from ember_aot_autograd.partition.default import default_partition
from ember_aot_autograd.partition.mincut import (
    is_recomputable,
    min_cut_rematerialization_partition,
    register_recomputable,
)

__all__ = [
    "Partition",
    "PartitionReport",
    "build_partition",
    "default_partition",
    "is_recomputable",
    "min_cut_rematerialization_partition",
    "register_recomputable",
]
