"""Ember's support for torch.distributed programs (DDP, FSDP2, collectives in graphs).

Ember adds no communication of its own: it compiles programs that use torch.distributed.
"""

from ember.distributed.ddp_split import active_ddp_module, split_for_ddp

__all__ = ["active_ddp_module", "split_for_ddp"]
