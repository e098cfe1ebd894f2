"""Extern kernels: ops the loop IR hands to a library (matmul, convolution, linalg, sort...)
and the counted fallback for prims with no lowering. Both run an op on real tensors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .layout import Layout
from .nodes import Buffer

#: Library prims whose aten op has an ``out=`` form writing a result of the prim's layout:
#: their results live in planned storage (a library-allocated result is fresh memory on every
#: call, first touched by the library: page faults a reused buffer does not take).
OUT_VARIANT_PRIMS = frozenset({"mm", "bmm", "cat", "addmm"})


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument: buffer ``name`` itself, or ``view`` (a strided layout over the
    buffer's storage) when the argument is a permuted/sliced/broadcast view of it."""

    name: str
    view: Layout | None = None

    def describe(self) -> str:
        if self.view is None:
            return self.name
        size = ", ".join(map(str, self.view.size))
        stride = ", ".join(map(str, self.view.stride))
        return f"{self.name}.as_strided([{size}], [{stride}], {self.view.offset})"


@dataclass(eq=False)
class ExternOutput(Buffer):
    """One output of an extern kernel (``index`` into its flattened results)."""

    index: int = 0


@dataclass(eq=False)
class ExternKernel:
    """Call ``kernel(*args, **kwargs)`` where TensorArg leaves become tensors.

    ``fallback`` marks a prim that had no lowering (counted and reported by the lowering).
    ``mutates`` names the buffer an in-place kernel writes; its output aliases that buffer,
    which therefore lives as long as the output does. ``writes_out``: the kernel writes its
    one output into a buffer it is given (``out=``), so the memory plan allocates that
    buffer like a computed one, reusing a dead buffer's storage (see OUT_VARIANT_PRIMS).
    """

    name: str
    kernel: Callable[..., Any]
    kernel_name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[ExternOutput] = field(default_factory=list)
    fallback: bool = False
    mutates: str | None = None
    writes_out: bool = False
    origins: list[str] = field(default_factory=list)

    def tensor_args(self) -> list[TensorArg]:
        from torch.utils._pytree import tree_leaves

        return [a for a in tree_leaves((self.args, self.kwargs)) if isinstance(a, TensorArg)]

    def describe(self) -> str:
        def fmt(a: Any) -> str:
            if isinstance(a, TensorArg):
                return a.describe()
            if isinstance(a, (list, tuple)):
                inner = ", ".join(fmt(x) for x in a)
                return f"[{inner}]"
            return str(a).removeprefix("torch.") if not isinstance(a, str) else repr(a)

        parts = [fmt(a) for a in self.args] + [f"{k}={fmt(v)}" for k, v in self.kwargs.items()]
        return f"{self.kernel_name}({', '.join(parts)})"
