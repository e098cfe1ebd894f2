"""A user's guard filter: torch.compile's option `guard_filter_fn` (`options={"guard_filter_fn": fn}`) in Ember.

`fn` receives one entry per guard a trace would install and returns a keep-flag per entry;
the guards it drops are not checked, so a later call that differs only there runs the
compiled code as it is (the user's explicit, unsafe trade of guard cost against
soundness, as with torch.compile). Entries carry the fields torch.compile documents for
its own (name, has_value, value, guard_type, derived_guard_types, is_global, orig_guard
with `orig_guard.source.is_unspecialized_nn_module()` and
`.is_unspecialized_builtin_nn_module()`), so filters written for torch.compile, including
`torch.compiler.skip_guard_on_*_unsafe` and `keep_tensor_guards_unsafe`, work unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.sources import (
    GlobalSource,
    LocalSource,
    Scope,
    Source,
    TorchStateSource,
    builtins_of,
)

GuardFilter = Callable[[Sequence["GuardFilterEntry"]], Sequence[bool]]

_MISSING = object()


@dataclass(frozen=True)
class GuardOrigin:
    """What a filter may ask about where a guarded value lives (`entry.orig_guard.source`)."""

    in_module: bool  # the value is reached through an nn.Module's attributes
    in_builtin_module: bool  # ... and the nearest such module is one of torch.nn's own
    local: bool

    def is_unspecialized_nn_module(self) -> bool:
        return self.in_module

    def is_unspecialized_builtin_nn_module(self) -> bool:
        return self.in_builtin_module

    def is_local(self) -> bool:
        return self.local


@dataclass(frozen=True)
class GuardRecord:
    """`entry.orig_guard`: Ember's guard and its origin facts."""

    guard: Guard
    source: GuardOrigin


@dataclass(frozen=True)
class GuardFilterEntry:
    """One guard as a filter sees it. `name` is the guarded expression without the frame's
    scope (`self.norm.eps`, `y`); `value` is what the trace saw there (`has_value` False
    where nothing is there, e.g. an absent attribute, or for global state)."""

    name: str
    has_value: bool
    value: object
    guard_type: str
    derived_guard_types: tuple[str, ...]
    is_global: bool
    orig_guard: GuardRecord


def _name(source: Source) -> str:
    """ "L['self'].norm.eps" -> "self.norm.eps" (torch.compile names guards this way)."""
    text = source.shown()
    root = source.root()
    if isinstance(root, LocalSource | GlobalSource):
        return root.name + text[len(root.shown()) :]
    return text


def _origin(source: Source, scope: Scope) -> GuardOrigin:
    """Whether some prefix of `source` (shorter than it) reaches an nn.Module."""
    chain = []
    node = source.base
    while node is not None:
        chain.append(node)
        node = node.base
    nearest = None
    for prefix in chain:  # nearest first
        try:
            value = prefix._get(scope)
        except Exception:
            continue
        if isinstance(value, torch.nn.Module):
            nearest = value
            break
    builtin = nearest is not None and type(nearest).__module__.startswith("torch.nn.")
    return GuardOrigin(nearest is not None, builtin, source.is_local())


def _type_name(guard: Guard) -> str:
    if isinstance(guard.source.root(), TorchStateSource):
        return "GLOBAL_STATE"
    return guard.kind.name


def entries_for(
    guards: Sequence[Guard], f_globals: dict[str, Any], f_locals: dict[str, Any]
) -> list[GuardFilterEntry]:
    scope = Scope(f_locals, f_globals, builtins_of(f_globals))
    entries = []
    for guard in guards:
        source = guard.source
        value = _MISSING
        if guard.kind is not GuardKind.ABSENT and not isinstance(source.root(), TorchStateSource):
            try:
                value = source._get(scope)
            except Exception:
                value = _MISSING
        kind = _type_name(guard)
        entries.append(
            GuardFilterEntry(
                name=_name(source),
                has_value=value is not _MISSING,
                value=value,
                guard_type=kind,
                derived_guard_types=(kind,),
                is_global=isinstance(source.root(), GlobalSource),
                orig_guard=GuardRecord(guard, _origin(source, scope)),
            )
        )
    return entries


def filter_guards(
    guards: Sequence[Guard],
    keep: GuardFilter,
    f_globals: dict[str, Any],
    f_locals: dict[str, Any],
) -> list[Guard]:
    """The guards `keep` keeps (one truth value per entry, in order)."""
    entries = entries_for(guards, f_globals, f_locals)
    flags = list(keep(entries))
    if len(flags) != len(entries):
        raise TypeError(
            f"guard_filter_fn returned {len(flags)} flags for {len(entries)} guards: it must "
            "return one truth value per entry it is given, in order"
        )
    return [guard for guard, flag in zip(guards, flags, strict=True) if flag]


__all__ = ["GuardFilter", "GuardFilterEntry", "entries_for", "filter_guards"]
