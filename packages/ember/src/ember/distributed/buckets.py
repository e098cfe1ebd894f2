"""Which nodes of a graph go into which DDP bucket.

DDP all-reduces gradients bucket by bucket, in the reverse order of the parameters, and a
bucket's all-reduce starts once all its gradients are ready. A graph compiled as one piece
hands every gradient over at the end of its backward; split into pieces along the same
buckets, each piece's backward hands over its gradients as soon as they exist, so the
all-reduce of the last layers overlaps the backward of the first ones.

The walk goes from the graph's output back to its inputs (the order backward runs), adding
the bytes of each parameter a node first uses to the open bucket; a bucket that has reached
its cap closes before the next node that brings a new parameter. Caps follow DDP's: the
first bucket (the last parameters) is small, the rest `bucket_cap_mb`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class BucketCaps:
    """Byte caps per bucket, in the order backward fills them (the last one repeats)."""

    caps: tuple[int, ...]

    def cap(self, index: int) -> int:
        return self.caps[min(index, len(self.caps) - 1)]

    @classmethod
    def of(cls, ddp: torch.nn.Module) -> BucketCaps:
        """The caps DDP itself uses (`bucket_cap_mb`, `bucket_cap_mb_list`, small first bucket)."""
        config = getattr(ddp, "_bucket_config", None)
        if config is not None:
            if config.per_bucket_bytes_caps:
                return cls(tuple(config.per_bucket_bytes_caps))
            return cls((config.first_bucket_bytes_cap, config.bucket_bytes_cap))
        cap = int(ddp.bucket_bytes_cap)
        return cls((min(cap, dist._DEFAULT_FIRST_BUCKET_BYTES), cap))


@dataclass
class Bucket:
    params: list[torch.fx.Node] = field(default_factory=list)
    nbytes: int = 0


def assign_buckets(
    gm: torch.fx.GraphModule, params: dict[torch.fx.Node, int], caps: BucketCaps
) -> tuple[dict[torch.fx.Node, int], list[Bucket]]:
    """Piece index (0 = first in forward order) for every non-placeholder node, and the
    buckets in forward order. `params` maps the placeholders of DDP's parameters that
    require grad to their size in bytes."""
    buckets = [Bucket()]
    reverse_index: dict[torch.fx.Node, int] = {}
    seen: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        new = [p for p in node.all_input_nodes if p in params and p not in seen]
        bucket = buckets[-1]
        if new and bucket.params and bucket.nbytes >= caps.cap(len(buckets) - 1):
            bucket = Bucket()
            buckets.append(bucket)
        for p in new:
            seen.add(p)
            bucket.params.append(p)
            bucket.nbytes += params[p]
        reverse_index[node] = len(buckets) - 1
    last = len(buckets) - 1
    pieces = {node: last - index for node, index in reverse_index.items()}
    return pieces, buckets[::-1]
