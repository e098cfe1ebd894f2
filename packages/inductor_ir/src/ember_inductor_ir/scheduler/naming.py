"""Kernel names that say what a kernel is: ``k<ordinal>_<kind>_<main ops>``.

A GPU profile lists kernels by name; ``kernel12`` says nothing, ``k12_red_sum_mul`` says it
is the graph's twelfth kernel, a reduction (``red``; ``poi`` for pointwise), whose bodies
sum and multiply (transcendental math named first, then the most frequent ops). An extern group is named by its library call (``k5_convolution``).
Code generators add their own suffixes (a split reduction's ``_partial``/``_finish``, a
matmul template's ``_template``). Names are identifiers in both C++ and Triton, short, and
unique in a graph (the ordinal)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import torch

from ..handlers.readwrite import TRANSCENDENTAL_OPS, ReadWriteHandler

#: ops that move or shape data rather than compute: never a kernel's "main" op
_PLUMBING = frozenset(
    {
        "load", "store", "store_reduction", "constant", "index_expr", "to_dtype",
        "to_dtype_bitcast", "indirect_indexing", "masked", "reduction",
    }
)  # fmt: skip
#: main ops named at most (reduction types first)
MAX_OPS = 3


class _OpNames(ReadWriteHandler):
    """Counts each op a body runs, by name, and the reduction types in order."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.reductions: list[str] = []

    def __getattr__(self, name: str) -> Any:
        op = super().__getattr__(name)

        def counted(*args: object) -> Any:
            self.ops[name] += 1
            return op(*args)

        return counted

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: Any) -> Any:
        if rtype not in self.reductions:
            self.reductions.append(rtype)
        return super().reduction(dtype, src_dtype, rtype, value)


def _identifier(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_") or "op"


def loops_kernel_name(ordinal: int, nodes: list[Any], reduces: bool) -> str:
    """``nodes``: the group's ScheduledNodes (run to see their ops)."""
    names = _OpNames()
    for node in nodes:
        node.run(names)
    # transcendental math first (it tells most about a kernel), then by how often it runs
    counted = [(op, n) for op, n in names.ops.most_common() if op not in _PLUMBING]
    compute = [op for op, _ in sorted(counted, key=lambda p: p[0] not in TRANSCENDENTAL_OPS)]
    main = [*names.reductions, *compute][:MAX_OPS]
    if not main:
        main = ["convert"] if names.ops["to_dtype"] else ["copy"]
    kind = "red" if reduces else "poi"
    return f"k{ordinal}_{kind}_{'_'.join(_identifier(op) for op in main)}"


def extern_kernel_name(ordinal: int, kernel_name: str) -> str:
    return f"k{ordinal}_{_identifier(kernel_name)}"
