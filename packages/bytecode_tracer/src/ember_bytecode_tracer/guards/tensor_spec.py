"""TensorSpec: the tensor metadata a trace was specialized on (what TENSOR_MATCH checks)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

# Dynamic dims are specialized on 0 and 1 (Dynamo's rule): a size-0/1 dim changes
# broadcasting and contiguity, so a graph traced with a symbolic dim assumes it is >= 2.
DYNAMIC_MIN_SIZE = 2


@dataclass(frozen=True)
class TensorSpec:
    """Exact type, dtype, device, layout, requires_grad, sizes and strides of a tensor.

    A `None` in `sizes` marks a dynamic dim: the guard only checks it is >= 2. A `None`
    in `strides` is not checked (the shape guards of a dynamic trace own those).
    `strides` is None for non-strided layouts (sparse, mkldnn), which have no strides.
    """

    tensor_type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    sizes: tuple[int | None, ...]
    strides: tuple[int | None, ...] | None
    layout: torch.layout = torch.strided

    def __post_init__(self) -> None:
        if not (isinstance(self.tensor_type, type) and issubclass(self.tensor_type, torch.Tensor)):
            raise TypeError(f"TensorSpec.tensor_type must be a Tensor class: {self.tensor_type!r}")
        if (self.strides is None) != (self.layout != torch.strided):
            raise ValueError("TensorSpec.strides is None exactly for non-strided layouts")
        if self.strides is not None and len(self.strides) != len(self.sizes):
            raise ValueError(f"TensorSpec sizes {self.sizes} and strides {self.strides} differ")

    @classmethod
    def of(cls, t: torch.Tensor, dynamic_dims: Iterable[int] = ()) -> TensorSpec:
        """The spec of a live tensor; `dynamic_dims` become dynamic (size and stride None)."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"TensorSpec.of needs a tensor, got {type(t).__name__}")
        strided = t.layout == torch.strided
        spec = cls(
            tensor_type=type(t),
            dtype=t.dtype,
            device=t.device,
            requires_grad=t.requires_grad,
            sizes=tuple(t.shape),
            strides=tuple(t.stride()) if strided else None,
            layout=t.layout,
        )
        return spec.with_dynamic(dynamic_dims)

    def with_dynamic(self, dims: Iterable[int]) -> TensorSpec:
        """This spec with `dims` dynamic: sizes only checked >= 2, strides not checked."""
        dims = {d % self.ndim for d in dims} if self.ndim else set()
        if not dims:
            return self
        sizes = tuple(None if i in dims else s for i, s in enumerate(self.sizes))
        strides = self.strides
        if strides is not None:
            strides = tuple(None if i in dims else s for i, s in enumerate(strides))
        return replace(self, sizes=sizes, strides=strides)

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def is_static(self) -> bool:
        return None not in self.sizes and (self.strides is None or None not in self.strides)

    def mismatch(self, t: object) -> str | None:
        """What differs between this spec and a live value (slow path), or None."""
        if type(t) is not self.tensor_type:
            return f"type: expected {type_name(self.tensor_type)}, got {type_name(type(t))}"
        assert isinstance(t, torch.Tensor)
        for name, (expected, actual) in _properties(self, t).items():
            if expected != actual:
                return f"{name}: expected {expected}, got {actual}"
        if not _dims_match(self.sizes, tuple(t.shape), dynamic_min=DYNAMIC_MIN_SIZE):
            return f"size: expected {_dims(self.sizes)}, got {_dims(tuple(t.shape))}"
        if self.strides is not None and not _dims_match(self.strides, tuple(t.stride())):
            return f"stride: expected {_dims(self.strides)}, got {_dims(tuple(t.stride()))}"
        return None

    def first_mismatch(self, t: object) -> str | None:
        """The first difference, pinned down: 'size mismatch at index 1. expected 128,
        actual 127', 'dtype mismatch. expected float32, actual float64', 'rank mismatch.
        expected 2, actual 3' (the phrasing of PyTorch's own recompile reasons); or None."""
        if type(t) is not self.tensor_type:
            return (
                f"type mismatch. expected {type_name(self.tensor_type)}, "
                f"actual {type_name(type(t))}"
            )
        assert isinstance(t, torch.Tensor)
        for name, (expected, actual) in _properties(self, t).items():
            if expected != actual:
                return f"{name} mismatch. expected {expected}, actual {actual}"
        if len(self.sizes) != t.dim():
            return f"rank mismatch. expected {len(self.sizes)}, actual {t.dim()}"
        size = _first_dim_mismatch(self.sizes, tuple(t.shape), DYNAMIC_MIN_SIZE)
        if size is not None:
            return f"size mismatch at {size}"
        if self.strides is not None:
            stride = _first_dim_mismatch(self.strides, tuple(t.stride()), None)
            if stride is not None:
                return f"stride mismatch at {stride}"
        return None

    def describe(self) -> str:
        """'float32[2, 3] stride (3, 1) cpu requires_grad=False' (+ the class if not Tensor)."""
        kind = "" if self.tensor_type is torch.Tensor else f"{type_name(self.tensor_type)} "
        strides = f" stride {_dims(self.strides)}" if self.strides is not None else ""
        layout = "" if self.layout == torch.strided else f" {self.layout}"
        sizes = ", ".join(_dim_names(self.sizes))
        return (
            f"{kind}{_dtype(self.dtype)}[{sizes}]{strides}{layout}"
            f" {self.device} requires_grad={self.requires_grad}"
        )


def describe_tensor(t: torch.Tensor) -> str:
    """The same one-line summary for a live tensor (used in failure messages)."""
    try:
        return TensorSpec.of(t).describe()
    except Exception as e:  # a subclass with broken metadata: say so rather than raise
        return f"{type_name(type(t))} (metadata unavailable: {type(e).__name__})"


def _dims_match(
    expected: tuple[int | None, ...], actual: tuple[int, ...], dynamic_min: int | None = None
) -> bool:
    if len(expected) != len(actual):
        return False
    for e, a in zip(expected, actual, strict=True):
        if e is None:
            if dynamic_min is not None and a < dynamic_min:
                return False
        elif e != a:
            return False
    return True


def _properties(spec: TensorSpec, t: torch.Tensor) -> dict[str, tuple[Any, Any]]:
    """Each scalar property a tensor guard checks: (expected, actual), in checking order."""
    return {
        "dtype": (_dtype(spec.dtype), _dtype(t.dtype)),
        "device": (spec.device, t.device),
        "layout": (spec.layout, t.layout),
        "requires_grad": (spec.requires_grad, t.requires_grad),
    }


def _first_dim_mismatch(
    expected: tuple[int | None, ...], actual: tuple[int, ...], dynamic_min: int | None
) -> str | None:
    """'index 1. expected 128, actual 127': the first dim that differs (ranks are equal);
    a dynamic dim (None) differs only when below `dynamic_min`."""
    for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if e is None and dynamic_min is not None and a < dynamic_min:
            return f"index {index}. expected a size >= {dynamic_min}, actual {a}"
        if e is not None and e != a:
            return f"index {index}. expected {e}, actual {a}"
    return None


def _dim_names(dims: tuple[int | None, ...]) -> tuple[str, ...]:
    return tuple("?" if d is None else str(d) for d in dims)


def _dims(dims: tuple[int | None, ...]) -> str:
    names = _dim_names(dims)
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def type_name(cls: type) -> str:
    """Short for builtins and torch classes ('Parameter'), qualified for the user's."""
    if cls.__module__ == "builtins" or cls.__module__.split(".")[0] == "torch":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
