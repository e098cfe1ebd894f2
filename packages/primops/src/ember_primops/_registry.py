"""The prim registry: one ``torch.library`` namespace, one ``Prim`` record per operator.

``define_prim`` declares the schema, registers the meta function (as the fake/meta kernel, so it
runs for meta tensors and under ``FakeTensorMode``) and the reference implementation (for the
CompositeExplicitAutograd key, so it runs on every real backend).

The reference implementation is wrapped: it first runs the meta function on meta copies of the
inputs (this validates the inputs with the same error messages as the meta path) and then lays the
real result out with the strides the meta function chose, so meta and reference always agree on
layout by construction; shapes and dtypes are asserted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

log = logging.getLogger("ember.primops")

NAMESPACE = "ember_prims"
_LIB = torch.library.Library(NAMESPACE, "DEF")

CATEGORIES = (
    "unary",
    "binary",
    "comparison",
    "ternary",
    "conversion",
    "reduction",
    "scan",
    "view",
    "shape",
    "creation",
    "random",
    "indexing",
    "extern",
)

# Our string tags -> torch.Tag (tags that torch does not know stay Ember-only strings).
_TORCH_TAGS = {
    "pointwise": torch.Tag.pointwise,
    "reduction": torch.Tag.reduction,
    "nondeterministic_seeded": torch.Tag.nondeterministic_seeded,
    "data_dependent_output": torch.Tag.data_dependent_output,
}


class PrimInputError(ValueError):
    """A prim was called with arguments that violate its contract (the message names the prim)."""


class PrimDtypeError(PrimInputError, TypeError):
    """A prim was called with tensors of unsupported or mismatched dtypes."""


def fail(prim: str, message: str, *, dtype: bool = False) -> None:
    """Raise the typed error for a bad argument of ``prim``."""
    cls = PrimDtypeError if dtype else PrimInputError
    raise cls(f"{NAMESPACE}.{prim}: {message}")


@dataclass(frozen=True)
class Prim:
    """One registered prim: what it is, how to compute its metadata and its value."""

    name: str
    schema: str
    category: str
    meta: Callable = field(repr=False)
    impl: Callable = field(repr=False)
    tags: tuple[str, ...] = ()
    notes: str = ""
    # The eager PyTorch callable this prim stands for, when there is one (tests use it).
    eager: Callable | None = field(default=None, repr=False)

    @property
    def overload(self) -> torch._ops.OpOverload:
        return getattr(getattr(torch.ops, NAMESPACE), self.name).default

    @property
    def is_view(self) -> bool:
        return "views" in self.tags


_PRIMS: dict[str, Prim] = {}


def _to_meta(x: object) -> object:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    return x


def _lay_out_like(prim: str, out: object, expected: object) -> object:
    """Return ``out`` with the strides of the meta result ``expected`` (copying if needed)."""
    if isinstance(out, torch.Tensor) and isinstance(expected, torch.Tensor):
        if out.shape != expected.shape or out.dtype != expected.dtype:
            raise AssertionError(
                f"{NAMESPACE}.{prim}: reference result {out.dtype}{list(out.shape)} disagrees "
                f"with meta {expected.dtype}{list(expected.shape)}"
            )
        if out.stride() != expected.stride() and out.numel() > 0:
            fresh = torch.empty_strided(
                out.shape, expected.stride(), dtype=out.dtype, device=out.device
            )
            fresh.copy_(out)
            return fresh
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(_lay_out_like(prim, o, e) for o, e in zip(out, expected, strict=True))
    return out


def _checked_reference(name: str, meta: Callable, impl: Callable, relayout: bool) -> Callable:
    def reference(*args, **kwargs):
        meta_args, meta_kwargs = pytree.tree_map(_to_meta, (args, kwargs))
        expected = meta(*meta_args, **meta_kwargs)
        out = impl(*args, **kwargs)
        return _lay_out_like(name, out, expected) if relayout else out

    reference.__name__ = f"{name}_reference"
    return reference


def define_prim(
    schema: str,
    category: str,
    meta: Callable,
    impl: Callable,
    *,
    tags: tuple[str, ...] = (),
    notes: str = "",
    eager: Callable | None = None,
    check_reference: bool = True,
) -> Prim:
    """Define ``ember_prims::<name>`` from its schema and register its kernels.

    ``check_reference=False`` skips running the meta function before the reference (creation and
    random prims, whose meta would allocate on the real device, and views, which must return the
    aliasing result of ``impl`` untouched, validate inside ``impl`` instead).
    """
    if category not in CATEGORIES:
        raise ValueError(f"unknown prim category {category!r}")
    name = schema.split("(", 1)[0].strip()
    if name in _PRIMS:
        raise ValueError(f"prim {name!r} defined twice")
    torch_tags = tuple(_TORCH_TAGS[t] for t in tags if t in _TORCH_TAGS)
    _LIB.define(schema, tags=torch_tags)
    relayout = "views" not in tags
    reference = _checked_reference(name, meta, impl, relayout) if check_reference else impl
    _LIB.impl(name, reference, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", meta, lib=_LIB)
    prim = Prim(name, schema, category, meta, impl, tuple(tags), notes, eager)
    _PRIMS[name] = prim
    log.debug("defined prim %s (%s)", name, category)
    return prim


def all_prims() -> list[Prim]:
    """Every registered prim, in definition order."""
    return list(_PRIMS.values())


def iter_prims(category: str | None = None) -> Iterator[Prim]:
    return (p for p in _PRIMS.values() if category is None or p.category == category)


def get_prim(name_or_op: object) -> Prim:
    """The ``Prim`` record for a prim name, its OpOverload or its OpOverloadPacket."""
    name = _prim_name(name_or_op)
    if name is None or name not in _PRIMS:
        raise KeyError(f"{name_or_op!r} is not an {NAMESPACE} prim")
    return _PRIMS[name]


def is_prim(op: object) -> bool:
    """Whether ``op`` is one of our prims (OpOverload or OpOverloadPacket)."""
    name = _prim_name(op)
    return name is not None and name in _PRIMS and not isinstance(op, str)


def _prim_name(op: object) -> str | None:
    if isinstance(op, str):
        return op.removeprefix(f"{NAMESPACE}::").removeprefix(f"{NAMESPACE}.")
    if isinstance(op, torch._ops.OpOverload):
        ns, _, rest = op.name().partition("::")
        return rest.split(".")[0] if ns == NAMESPACE else None
    if isinstance(op, torch._ops.OpOverloadPacket):
        ns, _, rest = op._qualified_op_name.partition("::")
        return rest if ns == NAMESPACE else None
    return None
