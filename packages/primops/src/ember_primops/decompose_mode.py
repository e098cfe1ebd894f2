"""`DecomposeMode`: run PyTorch code eagerly with the decomposition table applied recursively.

Every aten op that reaches the mode is replaced by its decomposition (which runs under the
mode again, so the aten ops it calls decompose too); prims run as they are. In-place and
out= overloads are handled like a functionalizing tracer would: the functional variant is
decomposed and its result written back into the mutated tensor. An aten op with no
decomposition raises `MissingDecomposition` (strict) or runs as is and is counted (not strict).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ember_primops.decompositions import decomposition_table

log = logging.getLogger("ember.decompose_mode")

aten = torch.ops.aten

PRIM_NAMESPACE = "ember_prims"

# Not tensor computations: they read a value back to Python, so no prim graph can hold them
# (a tracer graph-breaks on them). Run as is in every mode, counted in `passthrough_counts`.
PASSTHROUGH: frozenset = frozenset({aten._local_scalar_dense.default, aten.item.default})

# In-place ops that only change a tensor's metadata (no data to write back): run as is.
_METADATA_INPLACE: frozenset = frozenset(
    getattr(aten, name).default
    for name in ("squeeze_", "unsqueeze_", "t_", "transpose_", "as_strided_", "swapdims_")
    if hasattr(aten, name) and hasattr(getattr(aten, name), "default")
) | frozenset(
    {aten.squeeze_.dim, aten.squeeze_.dims, aten.transpose_.default, aten.resize_.default}
)


class UnsupportedLayout(NotImplementedError):
    """A non-strided (sparse, mkldnn...) tensor reached the mode: prims are dense-only."""


class MissingDecomposition(NotImplementedError):
    """An aten op reached a strict `DecomposeMode` and the table has no decomposition for it."""

    def __init__(self, op: torch._ops.OpOverload, args: tuple = ()):
        self.op = op
        shapes = ", ".join(
            f"{a.dtype}{list(a.shape)}" if isinstance(a, torch.Tensor) else type(a).__name__
            for a in args
        )
        super().__init__(
            f"no decomposition for {op} (called with {shapes}); register one with "
            f"@register_decomposition(torch.ops.{op}) in ember_primops.decompositions, "
            "pass a table that has it, or use DecomposeMode(strict=False) to run the aten op "
            "as a counted fallback"
        )


# In-place overloads whose functional twin has another overload name.
_RENAMED_TWINS = {
    "bernoulli_.float": "bernoulli.p",
    "bernoulli_.Tensor": "bernoulli.Tensor",
}


def _functional_variant(func: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The out-of-place overload an in-place (``add_``) or out= (``add.out``) overload mirrors."""
    schema = func._schema
    if not schema.is_mutable:
        return None
    renamed = _RENAMED_TWINS.get(f"{schema.name.split('::')[-1]}.{func._overloadname}")
    if renamed is not None:
        packet, overload = renamed.split(".")
        return getattr(getattr(aten, packet), overload)
    packet_name = func._schema.name.split("::")[-1]
    overload = func._overloadname
    if packet_name.endswith("_") and not packet_name.endswith("__"):
        # `normal_` has no `normal.default`: its functional twin is `normal_functional`.
        for name in (packet_name[:-1], packet_name[:-1] + "_functional"):
            packet = getattr(aten, name, None)
            if packet is not None and overload in packet.overloads():
                return getattr(packet, overload)
        return None
    if overload.endswith("out"):
        packet = getattr(aten, packet_name)
        base = overload[: -len("out")].rstrip("_") or "default"
        return getattr(packet, base, None)
    return None


class DecomposeMode(TorchDispatchMode):
    """Apply ``table`` (default: the whole decomposition table) to everything run inside.

    ``strict=True`` raises `MissingDecomposition` for an aten op with no decomposition;
    ``strict=False`` runs it as is and counts it in `fallback_counts`. Counters (by overload
    name): `decomposed_counts`, `prim_counts`, `fallback_counts`, `passthrough_counts`.
    """

    def __init__(
        self,
        table: Mapping[torch._ops.OpOverload, Callable] | None = None,
        *,
        strict: bool = True,
    ):
        super().__init__()
        if table is None:
            table = decomposition_table()
        self.table = table
        self.strict = strict
        self.decomposed_counts: collections.Counter[str] = collections.Counter()
        self.prim_counts: collections.Counter[str] = collections.Counter()
        self.fallback_counts: collections.Counter[str] = collections.Counter()
        self.passthrough_counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == PRIM_NAMESPACE:
            self.prim_counts[str(func)] += 1
            return func(*args, **kwargs)
        for arg in args:
            if isinstance(arg, torch.Tensor) and arg.layout != torch.strided:
                raise UnsupportedLayout(
                    f"{func} got a {arg.layout} tensor; prims and their decompositions handle "
                    "dense (strided) tensors only: convert with .to_dense() first"
                )
        decomposition = self.table.get(func)
        if decomposition is not None:
            self.decomposed_counts[str(func)] += 1
            with self:
                return decomposition(*args, **kwargs)
        if func in PASSTHROUGH or func in _METADATA_INPLACE:
            self.passthrough_counts[str(func)] += 1
            return func(*args, **kwargs)
        functional = _functional_variant(func)
        if functional is not None and functional in self.table:
            return self._run_functionalized(func, functional, args, kwargs)
        if self.strict:
            raise MissingDecomposition(func, args)
        log.debug("no decomposition for %s: running the aten op", func)
        self.fallback_counts[str(func)] += 1
        return func(*args, **kwargs)

    def _run_functionalized(self, func, functional, args, kwargs):
        """Decompose the functional variant, then write its results into the mutated args."""
        schema = func._schema
        bound = dict(kwargs)
        positional = []
        mutated: list[torch.Tensor] = []
        for i, arg in enumerate(schema.arguments):
            value = args[i] if i < len(args) else kwargs.get(arg.name, arg.default_value)
            is_written = arg.alias_info is not None and arg.alias_info.is_write
            if is_written:
                mutated.append(value)
            if arg.kwarg_only and is_written:
                bound.pop(arg.name, None)
            elif i < len(args):
                positional.append(value)
        self.decomposed_counts[str(functional)] += 1
        with self:
            result = self.table[functional](*positional, **bound)
        results = result if isinstance(result, (tuple, list)) else (result,)
        # Write-back is the functionalization epilogue, not a computation: run it as is.
        for target, value in zip(mutated, results, strict=False):
            if target.shape != value.shape:
                target.resize_(value.shape)
            target.copy_(value)
        return mutated[0] if len(mutated) == 1 else tuple(mutated)
