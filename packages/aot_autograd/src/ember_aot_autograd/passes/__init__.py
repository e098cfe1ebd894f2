"""Named passes over aot's graphs, for the backends that compile them.

- `PASSES`: graph passes over one prim graph, by name (registered by decorator in the module
  that owns each): `host_outputs` (`split_host_outputs`: a GPU graph's CPU-only outputs cut
  into a host graph) and `device_placement` (`move_scalar_work`: CPU work computed only from
  CPU scalars moved onto the graph's GPU).
- `PassedPartition`: a partitioner followed by `PartitionPass`es over its forward and
  backward graphs, one named `PartitionFn` for `aot_module`.
"""

from __future__ import annotations

from ember_aot_autograd.passes.device_placement import move_scalar_work
from ember_aot_autograd.passes.host_outputs import HostSplit, split_host_outputs
from ember_aot_autograd.passes.partition_passes import (
    PartitionPass,
    PassedPartition,
    partitioner_name,
)
from ember_aot_autograd.passes.registry import PASSES, GraphPass, graph_pass

__all__ = [
    "PASSES",
    "GraphPass",
    "HostSplit",
    "PartitionPass",
    "PassedPartition",
    "graph_pass",
    "move_scalar_work",
    "partitioner_name",
    "split_host_outputs",
]
