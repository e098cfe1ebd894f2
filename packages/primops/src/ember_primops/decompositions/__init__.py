"""The aten -> prim decomposition table.

``decomposition_table(ops=None)`` maps aten overloads to Python functions written over
``ember_primops.prims`` (and other aten ops, which decompose recursively). Family modules
register their rows with ``@register_decomposition``; importing this package imports them all.
"""

from __future__ import annotations

from ember_primops.decompositions import (  # noqa: F401  (importing a family registers it)
    amp,
    attention,
    backward,
    creation,
    elementwise,
    indexing,
    linalg,
    matmul,
    nn_activations,
    nn_losses,
    nn_norms,
    nn_pooling,
    pointwise,
    pool_backward,
    random,
    reductions,
    resample_backward,
    scans,
    shape,
    transformer_layers,
    views,
)
from ember_primops.decompositions._registry import (
    DuplicateDecomposition,
    decomposition_table,
    register_decomposition,
)
from ember_primops.decompositions.indexing import DataDependentIndex

__all__ = [
    "DataDependentIndex",
    "DuplicateDecomposition",
    "decomposition_table",
    "register_decomposition",
]
