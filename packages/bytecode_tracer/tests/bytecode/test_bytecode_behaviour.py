"""Rebuilt functions behave exactly like the originals on tricky control flow."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from typing import Any

import pytest
from bytecode_samples import (
    Child,
    Point,
    async_main,
    async_ticker,
    calls,
    closures,
    comprehensions,
    drive,
    exceptions,
    finally_return,
    gen,
    loops,
    make_counter,
    matcher,
    withs,
)

from conftest import function_from
from ember_bytecode_tracer.bytecode import assemble, decode

Rebuild = Callable[[Callable[..., Any]], types.FunctionType]
REPEAT = 20


def outcome(func: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func(*args, **kwargs))
    except Exception as e:  # compare exceptions by type and args
        return ("raise", type(e), e.args)


def same(rebuild: Rebuild, func: Callable[..., Any], *calls: tuple[Any, ...]) -> None:
    new = rebuild(func)
    assert new.__code__ is not func.__code__
    for args in calls:
        expected = outcome(func, *args)
        for _ in range(REPEAT):  # long enough for the specialising interpreter to kick in
            assert outcome(new, *args) == expected, args


# -- loops -------------------------------------------------------------------------------


def test_loops(rebuild: Rebuild) -> None:
    same(rebuild, loops, (0,), (5,), (30,))


# -- exceptions --------------------------------------------------------------------------


def test_exceptions(rebuild: Rebuild) -> None:
    same(rebuild, exceptions, (0,), (1,), (2,), (-3,))
    same(rebuild, finally_return, (0,), (2,), (-1,), (10,), (7,))


def test_with_blocks(rebuild: Rebuild) -> None:
    same(rebuild, withs, (0,), (1,), (2,), (3,))


# -- generators and coroutines ---------------------------------------------------------


def test_generators(rebuild: Rebuild) -> None:
    new = rebuild(gen)
    assert drive(new, 3) == drive(gen, 3)
    assert list(rebuild(gen)(0)) == list(gen(0))
    genexpr = rebuild(lambda xs: list(x * 2 for x in xs if x))
    assert genexpr([0, 1, 2]) == [2, 4]


def test_async(rebuild: Rebuild) -> None:
    new = rebuild(async_main)
    assert asyncio.run(new(2)) == asyncio.run(async_main(2))
    assert asyncio.run(new(-2)) == asyncio.run(async_main(-2))
    new_gen = rebuild(async_ticker)

    async def collect(agen):
        return [i async for i in agen]

    assert asyncio.run(collect(new_gen(4))) == [0, 1, 2, 3]


# -- comprehensions, closures, cells ---------------------------------------------------


def test_comprehensions_and_closures(rebuild: Rebuild) -> None:
    same(rebuild, comprehensions, ([1, 2, 3, 4],), ([],))
    same(rebuild, closures, (1,), (2, 3))


def test_rebuilt_closure_function(rebuild: Rebuild) -> None:
    step = make_counter(5)
    new_step = rebuild(step)  # free variables, shared cell with the original
    assert new_step() == 6
    assert step(2) == 8
    assert new_step(k=3) == 11


# -- calls ------------------------------------------------------------------------------


def test_calls_and_super(rebuild: Rebuild) -> None:
    same(rebuild, calls, (0,), (7,))
    who = rebuild(Child.who)
    assert who(Child(), 1) == Child().who(1)


# -- match -----------------------------------------------------------------------------


def test_match(rebuild: Rebuild) -> None:
    same(
        rebuild,
        matcher,
        (0,),
        (1,),
        (["cmd", 1, 2],),
        ((1, 2, 3),),
        ({"kind": "pt", "at": Point(0, 5)},),
        ({"kind": "k", "a": 1, "b": 2},),
        (Point(3, 3),),
        (Point(1, 2),),
        ("s",),
        (3.5,),
    )


# -- big functions: EXTENDED_ARG on constants, locals and jumps ------------------------


def compile_function(source: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def test_many_constants_and_locals(rebuild: Rebuild) -> None:
    lines = ["def big(flag):"]
    lines += [f"    v{i} = {i * 7 + 1000} if flag else 's{i}'" for i in range(300)]
    lines.append("    return [" + ", ".join(f"v{i}" for i in range(300)) + "]")
    big = compile_function("\n".join(lines), "big")
    assert len(big.__code__.co_consts) > 256 and len(big.__code__.co_varnames) > 256
    assert any(i.arg > 255 for i in decode(big.__code__) if i.opname == "LOAD_CONST")
    same(rebuild, big, (True,), (False,))


def long_jump_source(statements: int) -> str:
    body = "\n".join(f"            x = x + {i % 7}" for i in range(statements))
    return (
        "def far(n, flag):\n"
        "    x = 0\n"
        "    for i in range(n):\n"
        "        if flag:\n"
        f"{body}\n"
        "        else:\n"
        "            x -= 1\n"
        "        if x > 10 ** 9:\n"
        "            break\n"
        "    return x\n"
    )


@pytest.mark.parametrize("statements", [120, 14000])
def test_long_jumps(rebuild: Rebuild, statements: int) -> None:
    """Forward and backward jumps over > 255 code units (one EXTENDED_ARG) and, with
    14000 statements, over > 65535 units (two)."""
    far = compile_function(long_jump_source(statements), "far")
    jumps = [i for i in decode(far.__code__) if i.target is not None]
    assert max(j.arg for j in jumps) > (0xFFFF if statements > 1000 else 0xFF)
    same(rebuild, far, (3, True), (3, False), (0, True))


def test_code_object_identity_fields(rebuild: Rebuild) -> None:
    new = rebuild(exceptions)
    for field in ("co_name", "co_qualname", "co_flags", "co_argcount", "co_filename"):
        assert getattr(new.__code__, field) == getattr(exceptions.__code__, field)


def test_assemble_without_hints_matches() -> None:
    code = loops.__code__
    insts = decode(code)
    for inst in insts:
        inst.offset = None  # offsets are informational only
    assert assemble(insts, template=code).co_code == code.co_code
    assert function_from(loops, assemble(insts, template=code))(9) == loops(9)
