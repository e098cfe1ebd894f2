"""Lowerings per prim family, registered by name in ``registry.LOWERINGS`` on import."""

from . import (  # noqa: F401 (imported for their registrations)
    attention,
    collectives,
    conversion,
    convolution,
    creation,
    extern_ops,
    indexing_ops,
    pointwise,
    random_ops,
    reductions,
    scalar_reads,
    scatter_ops,
    shape,
    view_ops,
)
from .registry import LOWERINGS, lowering_for, prim_name, register_lowering

__all__ = ["LOWERINGS", "lowering_for", "prim_name", "register_lowering"]
