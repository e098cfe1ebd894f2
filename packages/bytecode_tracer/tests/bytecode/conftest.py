"""Shared fixtures for the bytecode toolkit tests."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ember_bytecode_tracer.bytecode import assemble, decode


def walk_code(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and every code object nested in its constants."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from walk_code(const)


def function_from(
    func: Callable[..., Any], code: types.CodeType, globals_: dict[str, Any] | None = None
) -> types.FunctionType:
    """A copy of `func` running `code` (same defaults and closure; same globals unless
    given)."""
    namespace = func.__globals__ if globals_ is None else globals_
    new = types.FunctionType(code, namespace, func.__name__, func.__defaults__, func.__closure__)
    new.__kwdefaults__ = func.__kwdefaults__
    return new


def deep_rebuild(code: types.CodeType, *, drop_args: bool = False) -> types.CodeType:
    """decode + assemble `code` and, first, every code object nested in its constants.
    With `drop_args` the raw args are discarded so only argval/target drive assembly."""
    consts = tuple(
        deep_rebuild(c, drop_args=drop_args) if isinstance(c, types.CodeType) else c
        for c in code.co_consts
    )
    swapped = {id(old): new for old, new in zip(code.co_consts, consts, strict=True)}
    insts = decode(code)
    for inst in insts:
        if inst.opname == "LOAD_CONST" and id(inst.argval) in swapped:
            inst.argval = swapped[id(inst.argval)]
        if drop_args and (inst.target is not None or not isinstance(inst.argval, int)):
            inst.arg = None
    return assemble(insts, template=code, co_consts=consts)


@pytest.fixture(params=["plain", "drop_args"])
def rebuild(request: pytest.FixtureRequest) -> Callable[[Callable[..., Any]], types.FunctionType]:
    """A function running decode + assemble of `func`'s code (nested code included),
    once keeping decoded args as hints and once recomputing them from argval/target."""

    def run(func: Callable[..., Any]) -> types.FunctionType:
        code = deep_rebuild(func.__code__, drop_args=request.param == "drop_args")
        return function_from(func, code)

    return run
