"""Meta and fake tensors with symbolic sizes and strides, made from real tensors.

`symbolic_tensor_meta` decides each dim's size (a symbol, a shared symbol, or a constant)
and derives strides from the real tensor's layout; the meta and fake constructors build
example values from that. Strides that follow from the sizes (a dense tensor in any dim
order) become expressions over the size symbols; any other stride stays the real constant.
Every stride is guarded (a dense tensor at other sizes might be laid out otherwise).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from ember_symbolic.guards import ShapeGuard
from ember_symbolic.layout import order_by_hint
from ember_symbolic.shape_env import DimDynamic, ShapeEnv
from ember_symbolic.sources import size_source, stride_source

SymIntLike = int | torch.SymInt


@dataclass(frozen=True)
class Dim:
    """How one dim of a tensor is made: what `mark_dynamic(t, d, min=, max=)` asks for is
    `Dim(DimDynamic.DYNAMIC, min, max)`; `mark_static` is `Dim(DimDynamic.STATIC)`."""

    dynamic: DimDynamic = DimDynamic.DYNAMIC
    min: int | None = None
    max: int | None = None


DimsSpec = Mapping[int, Dim | DimDynamic]


def _dim_spec(dims: DimsSpec | None, dim: int, default: DimDynamic) -> Dim:
    spec = (dims or {}).get(dim, default)
    return Dim(spec) if isinstance(spec, DimDynamic) else spec


@dataclass(frozen=True)
class SymbolicMeta:
    """Sizes and strides (ints or SymInts) for an example value of a real tensor."""

    sizes: tuple[SymIntLike, ...]
    strides: tuple[SymIntLike, ...]


def symbolic_tensor_meta(
    env: ShapeEnv,
    tensor: torch.Tensor,
    source: Hashable,
    *,
    dims: DimsSpec | None = None,
    default: DimDynamic = DimDynamic.DUCK,
) -> SymbolicMeta:
    """Symbolic sizes and strides for `tensor` read at `source`.

    `dims` maps a dim index to its `Dim` (or a bare DimDynamic); other dims use `default`
    (DUCK when everything is dynamic, STATIC when only marked dims are)."""
    size_exprs = []
    for d, value in enumerate(tensor.shape):
        spec = _dim_spec(dims, d, default)
        expr = env.create_symbol(
            int(value), size_source(source, d), dynamic=spec.dynamic, min=spec.min, max=spec.max
        )
        size_exprs.append(expr)
    stride_exprs = _strides(env, tensor, source, size_exprs)
    return SymbolicMeta(
        tuple(env.symint(e) for e in size_exprs), tuple(env.symint(e) for e in stride_exprs)
    )


def _strides(
    env: ShapeEnv, tensor: torch.Tensor, source: Hashable, sizes: list[sympy.Expr]
) -> list[sympy.Expr]:
    real_sizes, real_strides = list(tensor.shape), list(tensor.stride())
    out: list[sympy.Expr] = [sympy.Integer(s) for s in real_strides]
    expected, expected_real = sympy.Integer(1), 1
    for d in order_by_hint(real_strides, real_sizes):
        if real_sizes[d] == 1:
            continue  # any stride is right for a size-1 dim: keep the real one, unguarded
        if real_strides[d] == expected_real:
            out[d] = expected
        if not out[d].is_Integer or not all(e.is_Integer for e in sizes):
            env._record(ShapeGuard(out[d], env.where(), stride_source(source, d)))
        expected, expected_real = out[d] * sizes[d], real_strides[d] * real_sizes[d]
    return out


def meta_tensor(
    env: ShapeEnv, tensor: torch.Tensor, source: Hashable, **kwargs: Any
) -> torch.Tensor:
    """A meta tensor of `tensor`'s dtype with symbolic sizes/strides (see
    `symbolic_tensor_meta` for the keyword arguments)."""
    meta = symbolic_tensor_meta(env, tensor, source, **kwargs)
    out = torch.empty_strided(meta.sizes, meta.strides, dtype=tensor.dtype, device="meta")
    if tensor.requires_grad:
        out.requires_grad_(True)
    return out


def fake_mode(env: ShapeEnv, **kwargs: Any) -> Any:
    """A FakeTensorMode over our env.

    FakeTensorMode calls into `shape_env` only for what ShapeEnv's torch protocol
    provides, provided its dispatch cache is off: the cache keys symbolic values through
    PyTorch's own ShapeEnv and SymNode internals (`settings`, `_value_hash`)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(shape_env=env, **kwargs)
    mode.cache_enabled = False
    return mode


def fake_tensor(mode: Any, tensor: torch.Tensor, source: Hashable, **kwargs: Any) -> torch.Tensor:
    """A FakeTensor (of `mode`, made by `fake_mode`) with symbolic sizes/strides, on
    `tensor`'s device."""
    meta = meta_tensor(mode.shape_env, tensor, source, **kwargs)
    converter = mode.fake_tensor_converter
    with torch._C._DisableTorchDispatch():
        return converter.from_meta_and_device(mode, meta, tensor.device)
