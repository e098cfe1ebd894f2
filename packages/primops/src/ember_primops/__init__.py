"""Ember prims and the aten -> prim decomposition table. See README.md."""

from __future__ import annotations

from . import (  # noqa: F401  (importing a family module registers its prims)
    attention,
    conversion,
    creation,
    elementwise_binary,
    elementwise_unary,
    extern,
    indexing,
    linalg,
    random,
    reductions,
    scans,
    shapes,
    views,
)
from ._namespace import prims
from ._registry import (
    CATEGORIES,
    NAMESPACE,
    Prim,
    PrimDtypeError,
    PrimInputError,
    all_prims,
    get_prim,
    is_prim,
)

__all__ = [
    "CATEGORIES",
    "NAMESPACE",
    "Prim",
    "PrimDtypeError",
    "PrimInputError",
    "all_prims",
    "decomposition_table",
    "get_prim",
    "is_prim",
    "prims",
]


def decomposition_table(*args, **kwargs):
    """The aten -> prim decomposition table (imports ``ember_primops.decompositions`` lazily)."""
    from . import decompositions

    return decompositions.decomposition_table(*args, **kwargs)
