"""Which layout the wrapper holds each buffer's tensor in (see builder.py's docstring).

A kernel only needs a buffer's data pointer; extern calls and graph outputs need tensors of
given sizes and strides. A view costs ~1 us a call, so the tensor is allocated (or a dead
buffer's storage taken over) directly in the layout those uses want most often.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ember_inductor_ir import Schedule
from ember_inductor_ir.layout import Layout

from .size_bindings import concrete


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(concrete(v) for v in values)


#: a static tensor layout: (sizes, strides, storage offset)
Triple = tuple[tuple[int, ...], tuple[int, ...], int]


def triple(layout: Layout) -> Triple:
    return _ints(layout.size), _ints(layout.stride), concrete(layout.offset)


def extent(layout: Triple) -> int:
    """Elements of storage a layout spans, its offset included (0 when empty)."""
    size, stride, offset = layout
    if 0 in size:
        return 0
    return offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1


def is_contiguous(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Row-major strides, not counting dims of size 0 or 1 (as ``Tensor.is_contiguous``)."""
    expected = 1
    for n, s in zip(reversed(size), reversed(stride), strict=True):
        if n > 1 and s != expected:
            return False
        expected *= max(n, 1)
    return True


def _has_no_elements(layout: Triple) -> bool:
    return any(size == 0 for size in layout[0])


def preferred_layouts(sched: Schedule) -> dict[str, Triple]:
    """Per buffer, the layout extern calls and graph outputs take of it most often (its own
    layout on a tie): the layout worth holding the buffer's tensor in. Never a view with no
    elements of a buffer that has some: torch gives such a tensor no data pointer (0), and
    the buffer's kernels write through the tensor it is held in."""
    uses: dict[str, Counter] = {}
    for group in sched:
        if group.extern is not None:
            for arg in group.extern.tensor_args():
                view = arg.view if arg.view is not None else sched.layout(arg.name)
                uses.setdefault(arg.name, Counter())[triple(view)] += 1
    for spec in sched.graph_outputs:
        if spec.name is not None:
            uses.setdefault(spec.name, Counter())[triple(spec.layout)] += 1
    preferred = {}
    for name, counts in uses.items():
        own = triple(sched.layout(name))
        if not _has_no_elements(own):
            counts = Counter({v: n for v, n in counts.items() if not _has_no_elements(v)})
        if counts:
            preferred[name] = max(counts, key=lambda view: (counts[view], view == own))
    return preferred
