"""Human text for guards, and for why one failed (the slow path behind recompile messages)."""

from __future__ import annotations

import reprlib
import types
from collections.abc import Callable
from typing import Any

import torch

from ember_bytecode_tracer.guards.constants import strict_equal
from ember_bytecode_tracer.guards.guard import DESCRIBERS, Guard, GuardKind
from ember_bytecode_tracer.guards.sources import LocalSource, Scope, Source
from ember_bytecode_tracer.guards.tensor_spec import describe_tensor, type_name

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60


def summarize(value: Any) -> str:
    """A short description of a live value: its class and a clipped repr (never raises)."""
    if isinstance(value, torch.Tensor):
        return f"a tensor {describe_tensor(value)}"
    if isinstance(value, torch.nn.Module):  # its repr prints the whole model
        return f"a {type_name(type(value))} module (id {id(value):#x})"
    try:
        text = _repr.repr(value)
    except Exception:  # a user __repr__ that raises must not break a guard's message
        text = f"<{type_name(type(value))} object at {id(value):#x}>"
    return f"{text} ({type_name(type(value))})"


_NAMED = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
)


def _describe_object(obj: Any) -> str:
    try:
        if isinstance(obj, _NAMED):  # their names are plain attributes: safe to read
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "?")
            return f"<{type(obj).__name__} {name} at {id(obj):#x}>"
        return f"{summarize(obj)} at {id(obj):#x}"
    except Exception:  # a raising __getattr__/__repr__ (torch.classes): never fail a compile
        return f"<{type(obj).__name__} object at {id(obj):#x}>"


_DESCRIBE: dict[GuardKind, Callable[[Guard], str]] = {
    GuardKind.TYPE_MATCH: lambda g: f"{g.source} is of type {type_name(g.expected)}",
    GuardKind.ID_MATCH: lambda g: f"{g.source} is the object {_describe_object(g.expected)}",
    GuardKind.EQUALS_MATCH: lambda g: (
        f"{g.source} == {g.expected!r} ({type_name(type(g.expected))})"
    ),
    GuardKind.NONE_MATCH: lambda g: f"{g.source} is None",
    GuardKind.NOT_NONE: lambda g: f"{g.source} is not None",
    GuardKind.TENSOR_MATCH: lambda g: f"{g.source} is a tensor {g.expected.describe()}",
    GuardKind.LEN_MATCH: lambda g: (
        f"{g.source} is a {type_name(g.expected[0])} of length {g.expected[1]}"
    ),
    GuardKind.DICT_KEYS: lambda g: (
        f"{g.source} is a {type_name(g.expected[0])} with keys {list(g.expected[1])!r}"
    ),
    GuardKind.MODULE_TRAINING: lambda g: f"{g.source}.training is {g.expected}",
    GuardKind.TENSOR_ALIASING: lambda g: f"{g.source} is {g.expected}",
    GuardKind.NO_TENSOR_ALIASING: lambda g: (
        f"{', '.join(map(str, g.sources()))} are distinct objects"
    ),
    GuardKind.ABSENT: lambda g: f"{g.source} does not exist",
    GuardKind.SET_ORDER: lambda g: (
        f"a set of {', '.join(map(str, g.expected[0]))} iterates as "
        f"{', '.join(str(g.expected[0][i]) for i in g.expected[1])}"
    ),
}


DESCRIBERS.update(_DESCRIBE)  # what Guard.describe() reads


def describe_guard(guard: Guard) -> str:
    """Human text for the fact `guard` states (what `Guard.describe()` returns)."""
    return _DESCRIBE[guard.kind](guard)


class _Unreadable(Exception):
    def __init__(self, source: Source, error: Exception) -> None:
        super().__init__(f"{source} cannot be read ({type(error).__name__}: {error})")


def _read(source: Source, scope: Scope) -> Any:
    """The source's value; on failure, names the first step that could not be taken."""
    chain = [source]
    while chain[-1].base is not None:
        chain.append(chain[-1].base)  # type: ignore[arg-type]
    value = None
    for step in reversed(chain):
        try:
            value = step.step(value, scope)
        except Exception as e:
            raise _Unreadable(step, e) from e
    return value


def _actual(guard: Guard, scope: Scope) -> str:
    """What the live value looks like, phrased against what the guard expected."""
    kind = guard.kind
    if kind is GuardKind.ABSENT:
        return f"it exists: {summarize(_read(guard.source, scope))}"
    value = _read(guard.source, scope)
    if kind is GuardKind.TENSOR_MATCH:
        return guard.expected.mismatch(value) or "it matches now"
    if kind is GuardKind.MODULE_TRAINING:
        return f"training is {getattr(value, 'training', '<missing>')!r}"
    if kind is GuardKind.LEN_MATCH and type(value) is guard.expected[0]:
        return f"length {len(value)}"
    if kind is GuardKind.DICT_KEYS and type(value) is guard.expected[0]:
        return f"keys {_repr.repr(list(value))}"
    if kind is GuardKind.TENSOR_ALIASING:
        return f"{guard.expected} is {summarize(_read(guard.expected, scope))}, a different object"
    if kind is GuardKind.NO_TENSOR_ALIASING:
        values = [(s, _read(s, scope)) for s in guard.sources()]
        same = [
            f"{a} is {b}"
            for i, (a, va) in enumerate(values)
            for b, vb in values[i + 1 :]
            if va is vb
        ]
        return ", ".join(same) or "they are distinct now"
    if kind is GuardKind.SET_ORDER:
        added = guard.expected[0]
        found = {id(_read(s, scope)): s for s in added}
        order = [str(found.get(id(v), "?")) for v in {_read(s, scope) for s in added}]
        return f"it iterates as {', '.join(order)} now"
    if kind is GuardKind.ID_MATCH:
        return f"the object {_describe_object(value)}"
    if kind is GuardKind.EQUALS_MATCH and strict_equal(value, guard.expected):
        return "it matches now"
    return summarize(value)


def user_name(source: Source) -> str:
    """The source as the user wrote it: a local by its bare name (`x`, `d['a']`, `m.w`);
    other roots as `shown()` prints them (`G['w']`, a resume function's own names)."""
    base = source.base
    if base is None:
        if isinstance(source, LocalSource) and source.shown_as is None:
            return source.name
        return source.shown()
    return source.access(user_name(base))


def tensor_mismatch(source: Source, what: str) -> str:
    """ "tensor 'x' size mismatch at index 0. expected 2, actual 3": the lead of a failed
    tensor check's reason, in the words of PyTorch's own recompile reasons."""
    return f"tensor '{user_name(source)}' {what}"


def _lead(guard: Guard, scope: Scope) -> str:
    """A precise first difference that leads the reason ('' if there is none to give)."""
    if guard.kind is not GuardKind.TENSOR_MATCH:
        return ""
    try:
        what = guard.expected.first_mismatch(_read(guard.source, scope))
    except _Unreadable:
        return ""
    return f"{tensor_mismatch(guard.source, what)}; " if what else ""


def explain_failure(guard: Guard, scope: Scope) -> str:
    """One line: the failed fact, what was found instead, and where the trace read it; a
    tensor's first differing property leads (`tensor 'x' size mismatch at index 0...`)."""
    try:
        actual = _actual(guard, scope)
    except _Unreadable as e:
        actual = str(e)
    where = f" (read at {guard.user_location})" if guard.user_location else ""
    return f"{_lead(guard, scope)}{guard.describe()}{where}; got {actual}"
