"""Sources for values this package reads off a tensor: a size or a stride of one dim.

The base is whatever source object the caller uses for the tensor (the tracer's `Source`,
or a plain string in tests); rendering asks the caller's `name_of` for the base's text.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class TensorPropertySource:
    """`<base>.size()[dim]` or `<base>.stride()[dim]`."""

    base: Hashable
    prop: str  # "size" or "stride"
    dim: int

    def render(self, name_of: Callable[[Hashable], str]) -> str:
        return f"{name_of(self.base)}.{self.prop}()[{self.dim}]"

    def __str__(self) -> str:
        return f"{self.base}.{self.prop}()[{self.dim}]"


def size_source(base: Hashable, dim: int) -> TensorPropertySource:
    return TensorPropertySource(base, "size", dim)


def stride_source(base: Hashable, dim: int) -> TensorPropertySource:
    return TensorPropertySource(base, "stride", dim)
