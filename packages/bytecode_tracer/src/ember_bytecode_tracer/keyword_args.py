"""Keyword arguments whose name is a Python keyword, moved to their positions.

FX prints a node's kwargs as `name = value` in the graph's generated Python source, so an
argument named after a Python keyword (`Tensor.random_(**{"from": -10, "to": 10})`,
`Tensor.uniform_(**{"from": 0})`) would make the graph module fail to compile with a
SyntaxError. Such an argument is positional in the op's ATen schema: the call is rewritten to
pass it (and every argument before it) by position, which calls the same overload. Where no
schema of the op's name places every such argument, the call is a graph break (eager runs it).
"""

from __future__ import annotations

import keyword
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported

_MISSING = object()


def needs_positions(kwargs: dict) -> bool:
    return any(keyword.iskeyword(name) for name in kwargs)


def keywords_by_position(op: str, target: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """(args, kwargs) of the same call where no kwarg is named after a Python keyword."""
    name = target if op == "call_method" else getattr(target, "__name__", "")
    packet = getattr(torch.ops.aten, name, None) if name else None
    for overload in packet.overloads() if packet is not None else ():
        moved = _bind(getattr(packet, overload)._schema, args, kwargs)
        if moved is not None:
            return moved
    bad = sorted(k for k in kwargs if keyword.iskeyword(k))
    raise Unsupported(
        f"{name}: argument {bad} named after a Python keyword, and no schema places it"
    )


def _bind(schema: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """Args extended up to the last keyword-named argument of `schema`, or None if it doesn't fit."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    known = {a.name for a in schema.arguments}
    if len(args) > len(positional) or not set(kwargs) <= known:
        return None
    rest = dict(kwargs)
    names = [a.name for a in positional]
    last = max((names.index(k) for k in rest if keyword.iskeyword(k) and k in names), default=-1)
    if any(keyword.iskeyword(k) and k not in names for k in rest):
        return None
    out = list(args)
    for argument in positional[len(args) : last + 1]:
        value = rest.pop(argument.name, _MISSING)
        if value is _MISSING:
            if not argument.has_default_value():
                return None
            value = argument.default_value
        out.append(value)
    return tuple(out), rest


# Python scalar types that torch's argument parser reads as a dtype (`x.to(bool)`,
# `torch.zeros(2, dtype=float)`): FX would print them as `<class 'bool'>`, a SyntaxError.
_SCALAR_TYPE_DTYPES: dict[type, torch.dtype] = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}


def _is_torch_call(op: str, target: Any) -> bool:
    """A tensor method or a torch function: their parser treats a scalar type as a dtype
    (user functions in the graph, such as a Function's apply, receive the type itself)."""
    if op == "call_method":
        return True
    module = getattr(target, "__module__", None) or ""
    return op == "call_function" and (module == "torch" or module.startswith("torch."))


def scalar_types_as_dtypes(op: str, target: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The same call with Python scalar types passed as the dtypes torch reads them as;
    called once the call ran on the example values (a call eager rejects, such as
    `x.type(float)`, has already failed there)."""
    if not _is_torch_call(op, target):
        return args, kwargs

    def swap(value: Any) -> Any:
        if isinstance(value, type) and value in _SCALAR_TYPE_DTYPES:
            return _SCALAR_TYPE_DTYPES[value]
        if type(value) in (tuple, list):
            return type(value)(swap(v) for v in value)
        return value

    return tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()}
