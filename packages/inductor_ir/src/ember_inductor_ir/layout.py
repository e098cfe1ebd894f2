"""Buffer layouts: device, dtype, sizes, strides and offset as sympy expressions.

A :class:`FixedLayout` is decided (graph inputs, extern-kernel outputs, graph outputs, which
must match eager's strides). A :class:`FlexibleLayout` belongs to an intermediate buffer;
it proposes contiguous strides and may be changed until the scheduler freezes it.
Loaders read a buffer's layout when a body runs, not when the body is built, so a change
before freezing reaches every reader.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from .errors import DynamicShapeUnsupported
from .indexing import Expr, FloorDiv, as_exprs, contiguous_strides, known_le, static_int


@dataclass
class Layout:
    device: torch.device
    dtype: torch.dtype
    size: list[Expr]
    stride: list[Expr]
    offset: Expr = field(default_factory=lambda: sympy.Integer(0))

    def __post_init__(self) -> None:
        self.size = as_exprs(self.size)
        self.stride = as_exprs(self.stride)
        if len(self.size) != len(self.stride):
            raise ValueError(f"layout has {len(self.size)} sizes but {len(self.stride)} strides")

    def index(self, index: Sequence[Expr]) -> Expr:
        """The flat storage index of a logical index."""
        if len(index) != len(self.size):
            raise ValueError(f"index of rank {len(index)} into a layout of rank {len(self.size)}")
        return _flat_index(tuple(index), tuple(self.stride), tuple(self.size), self.offset)

    def storage_numel(self) -> int | Expr:
        """Elements of storage this layout spans (0 for an empty tensor); an expression over
        the size symbols when the layout is symbolic (symbols are >= 2: never empty)."""
        if any(getattr(s, "free_symbols", None) for s in (*self.size, *self.stride, self.offset)):
            last = sympy.Add(*[(n - 1) * st for n, st in zip(self.size, self.stride, strict=False)])
            return sympy.expand(self.offset + last + 1)
        sizes = [static_int(s, "buffer size") for s in self.size]
        if any(n == 0 for n in sizes):
            return 0
        last = sum(
            (n - 1) * static_int(st, "stride") for n, st in zip(sizes, self.stride, strict=False)
        )
        return static_int(self.offset, "storage offset") + last + 1

    def is_contiguous(self) -> bool:
        return all(
            a == b or n == 1
            for a, b, n in zip(self.stride, contiguous_strides(self.size), self.size, strict=True)
        )

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        size = ", ".join(str(s) for s in self.size)
        stride = ", ".join(str(s) for s in self.stride)
        offset = f" offset {self.offset}" if self.offset != 0 else ""
        return f"{dtype}[{size}] stride [{stride}]{offset} {self.device.type}"


@functools.lru_cache(maxsize=65536)
def _flat_index(index: tuple, stride: tuple, size: tuple, offset: Expr) -> Expr:
    """Layout.index of the layout's values as they are now (keyed by value, so that a
    layout changed before the scheduler froze it is never answered from before): every
    body run indexes the same few hundred layouts with the same loop variables."""
    terms = [i * s for i, s, n in zip(index, stride, size, strict=True) if n != 1]
    return offset + sympy.Add(*terms)


@dataclass
class FixedLayout(Layout):
    """A decided layout."""


@dataclass
class FlexibleLayout(Layout):
    """An undecided layout: contiguous until someone changes it; frozen by the scheduler."""

    frozen: bool = False

    def set_stride(self, stride: Sequence[object]) -> None:
        if self.frozen:
            raise ValueError("the layout is frozen; it can no longer change")
        self.stride = as_exprs(stride)

    def freeze(self) -> None:
        self.frozen = True


def channels_last_strides(size: Sequence[object]) -> list[Expr]:
    """NHWC (4-d) / NDHWC (5-d) strides for an NC... shaped tensor: channels innermost."""
    sizes = as_exprs(size)
    order = [0, *range(2, len(sizes)), 1]  # outermost to innermost
    stride: list[Expr] = [sympy.Integer(0)] * len(sizes)
    running: Expr = sympy.Integer(1)
    for d in reversed(order):
        stride[d] = running
        running = running * sizes[d]
    return stride


def is_channels_last(layout: Layout) -> bool:
    """4-d/5-d with channels innermost and not also plainly contiguous (size-1 dims aside)."""
    if len(layout.size) not in (4, 5) or layout.size[1] == 1:
        return False
    want = channels_last_strides(layout.size)
    same = all(n == 1 or a == b for a, b, n in zip(layout.stride, want, layout.size, strict=True))
    return same and not layout.is_contiguous()


def read_strides(index: Expr, index_vars: Sequence[sympy.Symbol]) -> list[Expr] | None:
    """The strides at which a load walks its buffer along each of a body's loop variables:
    ``index``'s coefficients when it is affine in them (a buffer read whole or through a
    permute), else None (a reshape's ``ModularIndexing``, an indirect index)."""
    index = sympy.expand(index)
    if index.atoms(sympy.Function):
        return None
    strides = [index.coeff(v) for v in index_vars]
    rest = index - sympy.Add(*[c * v for c, v in zip(strides, index_vars, strict=True)])
    if any(v in rest.free_symbols or v in c.free_symbols for c in strides for v in index_vars):
        return None
    return strides


def walk_format(size: Sequence[Expr], walked: Sequence[Expr]) -> str | None:
    """How a body's loops over ``size`` walk a buffer read at strides ``walked``:
    ``"channels_last"`` or ``"contiguous"`` by the order of the strides alone (a concat's
    input or a slice has fewer channels than the loops, so its strides are not the loops'
    own), None for another order, a broadcast, or a rank other than 4-d/5-d."""
    rank = len(size)
    if rank not in (4, 5) or size[1] == 1:
        return None
    real = [d for d in range(rank) if size[d] != 1]
    if any(walked[d] == 0 for d in real):
        return None
    order = [d for d in order_of_strides(size, walked) if d in real]
    channels_last = [d for d in (0, *range(2, rank), 1) if d in real]
    if order == channels_last and order != real:
        return "channels_last"
    if order == real and order != channels_last:
        return "contiguous"
    return None


def order_free(layout: Layout) -> bool:
    """Whether the layout is at once contiguous and channels-last, size-1 dims aside: a
    per-channel value kept 4-d (a batch norm's (1, C, 1, 1) statistics), whose memory order
    says nothing about the feature maps around it."""
    if len(layout.size) not in (4, 5):
        return False
    want = channels_last_strides(layout.size)
    same = all(n == 1 or a == b for a, b, n in zip(layout.stride, want, layout.size, strict=True))
    return same and layout.is_contiguous()


def stride_order(layout: Layout) -> list[int]:
    """Dimensions from outermost to innermost in storage. Size-1 dims keep their logical
    place; zero strides (broadcasts), or symbolic strides whose order is not proven for
    every size (``64*s0`` > ``64`` is), give the logical order."""
    return order_of_strides(layout.size, layout.stride)


def order_of_strides(size: Sequence[Expr], stride: Sequence[Expr]) -> list[int]:
    """``stride_order`` of the given sizes and strides."""
    rank = len(size)
    real = [d for d in range(rank) if size[d] != 1]
    strides = {d: stride[d] for d in real}
    if any(s == 0 for s in strides.values()):
        return list(range(rank))
    ordered: list[int] = []
    for d in real:  # insertion sort by proven comparisons, stable on ties
        at = len(ordered)
        while at > 0:
            mine, theirs = strides[d], strides[ordered[at - 1]]
            if known_le(theirs, mine) and not known_le(mine, theirs):
                at -= 1  # proven at least as large, and not always equal: further out
            elif known_le(mine, theirs):
                break
            else:
                return list(range(rank))  # no order proven for every size
        ordered.insert(at, d)
    order = iter(ordered)
    return [next(order) if d in real else d for d in range(rank)]


def contiguous_layout(
    device: torch.device, dtype: torch.dtype, size: Sequence[object], flexible: bool = True
) -> Layout:
    sizes = as_exprs(size)
    cls = FlexibleLayout if flexible else FixedLayout
    return cls(device, dtype, sizes, contiguous_strides(sizes))


def layout_of_tensor(t: torch.Tensor) -> FixedLayout:
    """The fixed layout of a real or fake tensor. Symbolic sizes and strides (SymInts of
    ember-symbolic-shapes) become their sympy expressions over the env's size symbols."""
    return FixedLayout(
        t.device,
        t.dtype,
        [size_expr(s) for s in t.shape],
        [size_expr(s) for s in t.stride()],
        sympy.sympify(size_expr(t.storage_offset())),
    )


def size_expr(value: object) -> object:
    """An int as is; a SymInt as its (simplified) sympy expression."""
    if isinstance(value, int):
        return value
    node = getattr(value, "node", None)
    expr = getattr(node, "expr", None)
    if expr is None:
        raise DynamicShapeUnsupported(f"size {value!r} is neither an int nor a symbolic size")
    return int(expr) if expr.is_Integer else canonical_size(expr)


def canonical_size(expr: Any, env: Any = None) -> Any:
    """A size expression in one form, so that equal sizes compare equal: simplified by the
    env (exact divisions it proved become plain quotients) and with floor divisions written
    as the loop IR's FloorDiv."""
    if not isinstance(expr, sympy.Basic) or not expr.free_symbols:
        return expr
    if env is not None:
        expr = expr.replace(FloorDiv, lambda a, b: sympy.floor(a / b))
        expr = _settle_extrema(env.simplify(expr), env)
    return expr.replace(sympy.floor, lambda x: FloorDiv(*x.as_numer_denom()))


def _settle_extrema(expr: Any, env: Any) -> Any:
    """``Max(a, b)`` / ``Min(a, b)`` that the env's ranges decide, as the one they pick (a
    slice's length ``Max(0, u0)`` of a size read with ``torch._check(u0 >= 0)``)."""
    if not expr.has(sympy.Max, sympy.Min) or not hasattr(env, "bound"):
        return expr

    def settle(e: Any) -> Any:
        a, b = e.args
        diff = env.bound(a - b)  # the range of a - b
        a_wins = diff.lo >= 0 if isinstance(e, sympy.Max) else diff.hi <= 0
        b_wins = diff.hi <= 0 if isinstance(e, sympy.Max) else diff.lo >= 0
        return a if a_wins is sympy.true else b if b_wins is sympy.true else e

    two = lambda e: isinstance(e, sympy.Max | sympy.Min) and len(e.args) == 2  # noqa: E731
    return expr.replace(two, settle)
