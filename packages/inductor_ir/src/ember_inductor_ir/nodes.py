"""Loop-IR nodes: computations (Pointwise, Reduction), storage (Buffer and its kinds) and the
mutable TensorBox that lowerings pass around.

A loader is ``loader(ops, index) -> value``: it produces the element at a logical index using
the given ops handler. Unrealized computations are inlined into their readers by calling
their loader; realized ones are read back with ``ops.load``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from .indexing import Expr, as_exprs
from .layout import Layout
from .ops import WELFORD

Loader = Callable[[Any, Sequence[Expr]], Any]
ReductionBody = Callable[[Any, Sequence[Expr], Sequence[Expr]], Any]


class IRNode:
    """Anything with a size, dtype and device that can be read element by element."""

    def get_size(self) -> list[Expr]:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Loader:
        raise NotImplementedError


@dataclass(eq=False)
class Pointwise(IRNode):
    """``out[index] = inner_fn(ops, index)`` over ``ranges``."""

    device: torch.device
    dtype: torch.dtype
    inner_fn: Loader
    ranges: list[Expr]

    def __post_init__(self) -> None:
        self.ranges = as_exprs(self.ranges)

    def get_size(self) -> list[Expr]:
        return self.ranges

    def get_dtype(self) -> torch.dtype:
        return self.dtype

    def get_device(self) -> torch.device:
        return self.device

    def make_loader(self) -> Loader:
        return self.inner_fn


@dataclass(eq=False)
class Reduction(IRNode):
    """``out[index] = reduce over rindex of inner_fn(ops, index, rindex)``.

    For ``welford`` (one-pass mean/variance), ``welford_part`` picks the stored component:
    0 mean, 1 m2 (sum of squared deviations), 2 count.
    """

    device: torch.device
    dtype: torch.dtype
    src_dtype: torch.dtype
    inner_fn: ReductionBody
    ranges: list[Expr]
    reduction_ranges: list[Expr]
    reduction_type: str
    welford_part: int | None = None

    def __post_init__(self) -> None:
        self.ranges = as_exprs(self.ranges)
        self.reduction_ranges = as_exprs(self.reduction_ranges)

    def get_size(self) -> list[Expr]:
        return self.ranges

    def get_dtype(self) -> torch.dtype:
        return self.dtype

    def get_device(self) -> torch.device:
        return self.device

    def make_loader(self) -> Loader:
        raise TypeError("a Reduction must be realized into a buffer before it is read")

    def reduce(self, ops: Any, index: Sequence[Expr], rindex: Sequence[Expr]) -> Any:
        value = ops.reduction(
            self.dtype, self.src_dtype, self.reduction_type, self.inner_fn(ops, index, rindex)
        )
        if self.reduction_type == WELFORD:
            return value[self.welford_part]
        return value


Loops = Pointwise | Reduction


@dataclass(eq=False)
class Buffer(IRNode):
    """Named storage with a layout. Readers load through the layout as it is at read time.

    ``widen_to``: set on a buffer whose storage holds a narrower dtype than the values it
    stands for (narrow_stores.py: float32 values that are all bfloat16 values, stored as
    bfloat16): every read widens back to it."""

    name: str
    layout: Layout
    widen_to: torch.dtype | None = field(default=None, kw_only=True)

    def get_size(self) -> list[Expr]:
        return self.layout.size

    def get_dtype(self) -> torch.dtype:
        return self.layout.dtype

    def get_device(self) -> torch.device:
        return self.layout.device

    def make_loader(self) -> Loader:
        def load(ops: Any, index: Sequence[Expr]) -> Any:
            return self.load(ops, self.layout.index(index))

        return load

    def load(self, ops: Any, storage_index: Expr) -> Any:
        """The element at ``storage_index`` of the storage, as the value it stands for: every
        read of a buffer goes through here (loaders and views), so a narrowed buffer's
        readers all widen, whenever their bodies run."""
        value = ops.load(self.name, storage_index)
        return value if self.widen_to is None else ops.to_dtype(value, self.widen_to)


@dataclass(eq=False)
class InputBuffer(Buffer):
    """A graph input (placeholder ``position``); its layout is the example input's."""

    position: int = 0


@dataclass(eq=False)
class ConstantBuffer(Buffer):
    """A tensor baked into the graph (a ``get_attr`` node)."""

    value: torch.Tensor | None = None


@dataclass(eq=False)
class ComputedBuffer(Buffer):
    """A realized Pointwise or Reduction: the unit the scheduler orders and fuses."""

    data: Loops | None = None
    origins: list[str] = field(default_factory=list)
    #: the kernel's loop order over the dims when it is not the storage order: a value
    #: stored channels-last for a library call but computed from contiguous inputs walks
    #: them in their order (one strided store instead of strided loads)
    loop_order: list[int] | None = None

    @property
    def ranges(self) -> list[Expr]:
        assert self.data is not None
        return self.data.ranges

    @property
    def reduction_ranges(self) -> list[Expr]:
        return self.data.reduction_ranges if isinstance(self.data, Reduction) else []

    def is_reduction(self) -> bool:
        return isinstance(self.data, Reduction)

    def store_body(self, ops: Any, index: Sequence[Expr], rindex: Sequence[Expr] = ()) -> None:
        """Compute this buffer at ``index`` (reducing over ``rindex``) and store it."""
        out_index = self.layout.index(index)
        if isinstance(self.data, Reduction):
            ops.store_reduction(self.name, out_index, self.data.reduce(ops, index, rindex))
        else:
            assert self.data is not None
            value = self.data.inner_fn(ops, index)
            if self.widen_to is not None:  # narrowed: the value is exactly a storage value
                value = ops.to_dtype(value, self.layout.dtype)
            ops.store(self.name, out_index, value)


@dataclass(eq=False)
class TensorBox(IRNode):
    """The value a lowering returns: wraps a computation, a buffer or a view. Realizing it
    swaps the wrapped computation for a buffer, so readers made afterwards load it."""

    data: IRNode

    def get_size(self) -> list[Expr]:
        return self.data.get_size()

    def get_dtype(self) -> torch.dtype:
        return self.data.get_dtype()

    def get_device(self) -> torch.device:
        return self.data.get_device()

    def make_loader(self) -> Loader:
        # Bound now: if a later lowering realizes this box, readers made before then (maybe
        # realized already) keep inlining the computation instead of loading a buffer written
        # after them. Only a reduction is looked up at call time: it is realized right after
        # the lowering that made it, before anything reads it.
        if isinstance(self.data, Reduction):
            return lambda ops, index: self.data.make_loader()(ops, index)
        return self.data.make_loader()


def zero_index(rank: int) -> list[Expr]:
    return [sympy.Integer(0)] * rank
