"""The layout of a copied matrix operand: which of its last two dims is stored innermost.

A matmul library (cuBLAS, oneDNN) takes each operand with either of its last two dims at
stride 1 (a transposed operand is a flag, not a copy). When an operand must be copied first
(a view its buffer's strides cannot express: attention's ``k.transpose(-2, -1)`` over heads
split from one projection), the copy may be stored either way, and the choice matters twice:

- the library's fast kernels want the stride between rows (the leading dimension) to be a
  multiple of 16 bytes; ConViT's ``q @ k^T`` with ``k^T`` stored row-major as [48, 196]
  rows of bfloat16 ran cuBLAS's unaligned kernel, four times slower than the same product
  with ``k`` stored [196, 48] and passed transposed;
- the copy reads its source along the grain when it stores innermost the dim the source has
  innermost: a straight copy instead of a transpose.

Alignment decides first, then the source's grain, then row-major (eager's ``.contiguous()``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch

from .handlers.readwrite import ReadWriteHandler
from .indexing import Expr, index_vars, simplify_index
from .layout import FixedLayout, Layout

#: the leading dimension a library's vectorized GEMM kernels need, in bytes
ALIGNMENT_BYTES = 16


def matrix_copy_layout(value: object) -> Layout | None:
    """The layout a copy of matrix operand ``value`` (an IR node of rank 2 or more) is
    stored in; None for row-major (the default copy)."""
    size = list(value.get_size())  # type: ignore[attr-defined]
    if len(size) < 2 or not all(isinstance(n, (int, sympy.Integer)) for n in size):
        return None
    rows, cols = int(size[-2]), int(size[-1])
    if rows == 1 or cols == 1:
        return None  # a vector: both layouts are one
    itemsize = torch.empty((), dtype=value.get_dtype()).element_size()  # type: ignore[attr-defined]
    aligned_rows = (cols * itemsize) % ALIGNMENT_BYTES == 0
    aligned_cols = (rows * itemsize) % ALIGNMENT_BYTES == 0
    if aligned_rows and not aligned_cols:
        return None
    if not (aligned_cols and not aligned_rows) and _source_grain(value, size) != len(size) - 2:
        return None
    device, dtype = value.get_device(), value.get_dtype()  # type: ignore[attr-defined]
    return FixedLayout(device, dtype, size, _column_major(size))


def _column_major(size: Sequence[int]) -> list[int]:
    """Row-major strides over the leading dims, the last two dims swapped in memory."""
    stride = [0] * len(size)
    stride[-2], stride[-1] = 1, int(size[-2])
    step = int(size[-2]) * int(size[-1])
    for d in range(len(size) - 3, -1, -1):
        stride[d] = step
        step *= int(size[d])
    return stride


def _source_grain(value: object, size: Sequence[int]) -> int | None:
    """Which of the last two dims every load of ``value`` walks at stride 1, if one does."""
    index = index_vars("i", len(size))
    reader = ReadWriteHandler()
    value.make_loader()(reader, index)  # type: ignore[attr-defined]
    ranges = dict(zip(index, size, strict=True))
    grains = set()
    for _, expr in reader.reads:
        expr = simplify_index(expr, ranges)
        unit = [d for d in (len(size) - 2, len(size) - 1) if _step(expr, index[d]) == 1]
        grains.add(unit[0] if len(unit) == 1 else None)
    return grains.pop() if len(grains) == 1 else None


def _step(expr: Expr, var: sympy.Symbol) -> Expr | None:
    """How far ``expr`` moves when ``var`` steps by one, where that is a constant."""
    step = sympy.expand(expr.subs(var, var + 1) - expr)
    return step if step.is_Integer else None


def copy_layout_for(kernel_name: str, value: object) -> Layout | None:
    """The layout of a copy of ``value`` made for extern kernel ``kernel_name``'s argument:
    a matmul's operand as above; None (row-major) for every other kernel."""
    if kernel_name not in MATMUL_KERNELS:
        return None
    return matrix_copy_layout(value)


#: extern kernels whose tensor arguments are matrices (or batches of them)
MATMUL_KERNELS = frozenset({"mm", "bmm", "addmm"})
