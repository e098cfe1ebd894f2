"""What an aten op does to its arguments, read from its schema: views, mutations, variants.

Functionalization asks three questions of every op: does it return views of an input, which
arguments does it write, and which out-of-place overload computes the same values. The
answers come from the op's schema and tags, never from a hand-written list of op names.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch._ops import OpOverload

from ember_aot_autograd.errors import UnsupportedOpError


def bind_arguments(func: OpOverload, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Arguments by schema name (defaults filled in), whether passed by position or keyword."""
    bound: dict[str, Any] = {}
    for index, argument in enumerate(func._schema.arguments):
        if index < len(args) and not argument.kwarg_only:
            bound[argument.name] = args[index]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
        else:
            bound[argument.name] = None
    return bound


def call_by_name(func: OpOverload, values: dict[str, Any]) -> tuple[tuple, dict]:
    """(args, kwargs) for `func` from a name -> value mapping (missing names take defaults)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for argument in func._schema.arguments:
        if argument.name not in values:
            continue
        if argument.kwarg_only:
            kwargs[argument.name] = values[argument.name]
        else:
            args.append(values[argument.name])
    return tuple(args), kwargs


def written_arguments(func: OpOverload) -> list[str]:
    """Names of the arguments the schema marks as written (`Tensor(a!)`)."""
    return [
        a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write
    ]


def returns_views(func: OpOverload) -> bool:
    """True when the op's outputs alias an input without writing it (view ops)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


#: torch.Tag.inplace is newer than torch 2.11; the schema test below covers older versions
_INPLACE_TAG = getattr(torch.Tag, "inplace", None)


def is_inplace(func: OpOverload) -> bool:
    return (_INPLACE_TAG is not None and _INPLACE_TAG in func.tags) or (
        func._schema.name.endswith("_") and written_arguments(func) == ["self"]
    )


def is_out_variant(func: OpOverload) -> bool:
    written = written_arguments(func)
    return bool(written) and all(a.kwarg_only for a in func._schema.arguments if a.name in written)


def changes_metadata(func: OpOverload) -> bool:
    """In-place view ops (t_, resize_, as_strided_) change sizes or strides, not values."""
    return torch.Tag.inplace_view in func.tags


def _signature(arguments, skip: frozenset[str] = frozenset()) -> tuple:
    return tuple((a.name, str(a.type)) for a in arguments if a.name not in skip)


def _packet(namespace: str, name: str):
    return getattr(getattr(torch.ops, namespace), name, None)


@functools.cache
def functional_overload(func: OpOverload) -> OpOverload:
    """The out-of-place overload computing what `func` writes (add_.Tensor -> add.Tensor).

    In-place ops drop the trailing underscore (or, failing that, take the
    `<name>_functional` twin: normal_ -> normal_functional); out= ops drop their out
    arguments; all are matched by argument names and types. Ops with other mutable arguments
    use the `<name>_functional` packet, which returns the new values after the usual outputs.
    """
    schema = func._schema
    namespace, name = schema.name.split("::")
    if is_inplace(func):
        wanted = _signature(schema.arguments)
        packets = (_packet(namespace, name[:-1]), _packet(namespace, name[:-1] + "_functional"))
    elif is_out_variant(func):
        wanted = _signature(schema.arguments, frozenset(written_arguments(func)))
        packets = (_packet(namespace, name),)
    else:
        wanted = None
        packets = (_packet(namespace, name + "_functional"),)
    for packet in packets:
        op = _matching_overload(packet, func._overloadname, wanted)
        if op is not None:
            return op
    raise UnsupportedOpError(func, "mutates an argument and has no out-of-place overload")


def _matching_overload(packet: Any, overload: str, wanted: tuple | None) -> OpOverload | None:
    if packet is None:
        return None
    for candidate in [overload] + [o for o in packet.overloads() if o != overload]:
        op = getattr(packet, candidate, None)
        if op is None or op._schema.is_mutable:
            continue
        if wanted is None or _signature(op._schema.arguments) == wanted:
            return op
    return None


def is_random(func: object) -> bool:
    return isinstance(func, OpOverload) and torch.Tag.nondeterministic_seeded in func.tags
