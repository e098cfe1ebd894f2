"""Memory-layout predicates over symbolic sizes and strides, as sympy conditions.

torch asks a tensor's SymNode for these (`is_contiguous(sizes, strides)` and friends) when
it computes a symbolic tensor's flags; the answers are conditions that get decided (and
guarded) only when something reads the flag.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

_CHANNELS_LAST_ORDER = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}  # innermost dim first


def dense_in_order(sizes: Sequence, strides: Sequence, order: Sequence[int]) -> sympy.Basic:
    """True when the tensor is laid out densely with `order[0]` innermost.

    Size-1 dims may have any stride; a tensor with a zero size is trivially contiguous.
    """
    cond: sympy.Basic = sympy.true
    expected: sympy.Expr = sympy.Integer(1)
    for dim in order:
        size, stride = sizes[dim], strides[dim]
        cond = sympy.And(cond, sympy.Or(sympy.Eq(size, 1), sympy.Eq(stride, expected)))
        expected = expected * size
    empty = sympy.Or(*(sympy.Eq(s, 0) for s in sizes))
    return sympy.Or(cond, empty)


def is_contiguous(sizes: Sequence, strides: Sequence) -> sympy.Basic:
    return dense_in_order(sizes, strides, range(len(sizes) - 1, -1, -1))


def is_channels_last_contiguous(sizes: Sequence, strides: Sequence, ndim: int) -> sympy.Basic:
    if len(sizes) != ndim:
        return sympy.false
    return dense_in_order(sizes, strides, _CHANNELS_LAST_ORDER[ndim])


def order_by_hint(strides_hint: Sequence[int], sizes_hint: Sequence[int]) -> list[int]:
    """Dims from innermost to outermost by their example strides (ties: later dim inner)."""
    return sorted(range(len(strides_hint)), key=lambda d: (strides_hint[d], -d))


def is_non_overlapping_and_dense(
    sizes: Sequence, strides: Sequence, sizes_hint: Sequence[int], strides_hint: Sequence[int]
) -> sympy.Basic:
    """Dense in the stride order the example values show (a permutation of a contiguous
    tensor). Deciding the order from hints is sound: the condition itself is exact."""
    return dense_in_order(sizes, strides, order_by_hint(strides_hint, sizes_hint))


def is_channels_last_strides(
    sizes_hint: Sequence[int], strides_hint: Sequence[int], ndim: int
) -> bool:
    """Whether the example strides order the dims as channels-last (a memory-format
    suggestion only: it picks output layouts, never correctness)."""
    if len(sizes_hint) != ndim:
        return False
    order = [d for d in _CHANNELS_LAST_ORDER[ndim] if sizes_hint[d] != 1]
    strides = [strides_hint[d] for d in order]
    return bool(order) and order[0] == 1 and strides == sorted(strides) and len(order) > 1
