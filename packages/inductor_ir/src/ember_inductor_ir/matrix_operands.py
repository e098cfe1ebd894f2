"""Matrix operands with aligned rows: the buffers a library matmul reads get a padded row
stride where the target asks for one (``Target.matmul_row_alignment``).

cuBLAS picks its fast kernels (and on Hopper, its TMA-fed ones) only for operands whose
leading dimension is a multiple of 16 bytes; otherwise it runs an "align1" kernel that loads
one element at a time. Attention over token counts like 196 (ConViT, 14x14 patches) or 49
(Swin's 7x7 windows) stores ``k^T`` and the softmax with rows of that many bfloat16 values:
ConViT's ``q @ k^T`` took 3.4 ms a step in align1 kernels on the H200, against 0.55 ms for
the same product with aligned operands. Where Ember still decides a buffer's strides, its
rows are padded instead (196 -> 200 elements): the kernel that writes it stores at the padded
index, the library reads a strided view, and no copy is added.
"""

from __future__ import annotations

import sympy

from .layout import FlexibleLayout, Layout, stride_order
from .nodes import Buffer, IRNode
from .views import storage_view

#: the library prims whose tensor arguments are matrices (or batches of them)
MATRIX_PRIMS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm"})

#: rows shorter than this many elements stay unpadded: padding a row of 6 to 8 costs a third
#: more memory, and cuBLAS's kernels for such tiny matrices were slower with it (TNT's
#: 16x6 pixel-attention heads)
MIN_PADDED_ROW = 32


def align_matrix_operand(
    value: IRNode, found: tuple[Buffer, Layout], alignment: int
) -> tuple[Buffer, Layout]:
    """``found`` (``value``'s buffer and its view) with the buffer's rows padded to
    ``alignment`` bytes where that makes the view's leading dimension aligned and the
    buffer's strides are still undecided; else ``found`` unchanged."""
    buffer, view = found
    layout = buffer.layout
    if not isinstance(layout, FlexibleLayout) or layout.frozen or _aligned(view, alignment):
        return found
    padded = _padded_strides(layout, alignment)
    if padded is None:
        return found
    before = list(layout.stride)
    layout.set_stride(padded)
    again = storage_view(value)
    if again is not None and again[0] is buffer and _aligned(again[1], alignment):
        return again
    layout.set_stride(before)
    return found


def _aligned(view: Layout, alignment: int) -> bool:
    """Whether ``view``'s last two dims are a matrix a library reads without alignment
    penalty: one dim at stride 1 (or of size 1), the other's stride a multiple of
    ``alignment`` bytes. Symbolic strides count as aligned (nothing to decide statically)."""
    if len(view.size) < 2:
        return True
    sizes, strides = view.size[-2:], view.stride[-2:]
    if any(getattr(x, "free_symbols", None) for x in (*sizes, *strides)):
        return True
    itemsize = _itemsize(view)
    lead = [int(s) for n, s in zip(sizes, strides, strict=True) if int(n) != 1 and int(s) != 1]
    return all((s * itemsize) % alignment == 0 for s in lead)


def _padded_strides(layout: Layout, alignment: int) -> list[sympy.Expr] | None:
    """``layout``'s strides with its innermost run padded to ``alignment`` bytes, dims
    keeping their storage order; None where the layout is symbolic, not dense, or its rows
    are already aligned or too short to pad."""
    if any(getattr(x, "free_symbols", None) for x in (*layout.size, *layout.stride)):
        return None
    order = stride_order(layout)  # outermost to innermost
    sizes = [int(n) for n in layout.size]
    inner = order[-1]
    if int(layout.stride[inner]) != 1 or sizes[inner] < MIN_PADDED_ROW:
        return None
    step = alignment // _itemsize(layout)
    if step <= 1 or sizes[inner] % step == 0:
        return None
    stride = [sympy.Integer(0)] * len(sizes)
    stride[inner] = sympy.Integer(1)
    running = -(-sizes[inner] // step) * step
    for d in reversed(order[:-1]):
        stride[d] = sympy.Integer(running)
        running *= sizes[d]
    return stride


def _itemsize(layout: Layout) -> int:
    return int(layout.dtype.itemsize)
