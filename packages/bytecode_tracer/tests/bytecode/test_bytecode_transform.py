"""Edited and generated code runs: inserted calls, renamed locals, new tables, code
written from scratch, and the per-version helpers."""

from __future__ import annotations

import asyncio
import dis
import inspect
import types
from collections.abc import Callable
from typing import Any

import pytest
from bytecode_samples import (
    async_main,
    calls,
    closures,
    comprehensions,
    drive,
    exceptions,
    finally_return,
    gen,
    loops,
    matcher,
    withs,
)

from conftest import function_from
from ember_bytecode_tracer.bytecode import (
    UNSET,
    Instruction,
    assemble,
    create_binary_op,
    create_call,
    create_instruction,
    create_jump,
    create_load_const,
    create_load_fast,
    create_load_global,
    create_load_method,
    create_rot_n,
    decode,
    format_instructions,
    insert_before,
    prefix_instructions,
    stack_depth,
    stack_depths,
)
from ember_bytecode_tracer.bytecode import version as v

RETURNS: list[str] = []


def count_return() -> None:
    RETURNS.append("return")


def outcome(func: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func(*args))
    except Exception as e:
        return ("raise", type(e), e.args)


def edited(func: Callable[..., Any], edit: Callable[[list[Instruction]], None]) -> Any:
    insts = decode(func.__code__)
    edit(insts)
    # the samples' own globals plus the names the edits refer to
    namespace = {**func.__globals__, "count_return": count_return, "NEW_GLOBAL_MARK": "marked"}
    return function_from(func, assemble(insts, template=func.__code__), namespace)


def counter_call() -> list[Instruction]:
    return [
        create_load_global("count_return", push_null=True),
        *create_call(0),
        create_instruction("POP_TOP"),
    ]


def count_returns(insts: list[Instruction]) -> None:
    for inst in [i for i in insts if i.opname in ("RETURN_VALUE", "RETURN_CONST")]:
        insert_before(insts, inst, counter_call())


@pytest.mark.parametrize(
    ("func", "calls"),
    [
        (loops, [(0,), (7,), (40,)]),
        (exceptions, [(0,), (1,), (2,), (-3,)]),
        (finally_return, [(0,), (2,), (-1,), (10,), (7,)]),
        (withs, [(0,), (1,), (2,), (3,)]),
        (matcher, [(0,), (["cmd", 1],), ((1, 2, 3),), ({"kind": 1},), ("s",), (2.5,)]),
        (comprehensions, [([1, 2, 3],)]),
        (closures, [(1,), (2, 3)]),
    ],
)
def test_counter_before_every_return(func: Callable[..., Any], calls: list[tuple]) -> None:
    """Every call that returns normally runs exactly one inserted counter call, whichever
    return (inside try/finally, with, loops, match arms) it leaves through."""
    new = edited(func, count_returns)
    for args in calls:
        RETURNS.clear()
        expected = outcome(func, *args)
        assert RETURNS == []
        for _ in range(20):
            assert outcome(new, *args) == expected
        returned = expected[0] == "ok"
        assert len(RETURNS) == 20 * int(returned)


def test_counter_in_generator_and_coroutine() -> None:
    RETURNS.clear()
    assert drive(edited(gen, count_returns), 2) == drive(gen, 2)
    assert RETURNS == ["return"]
    RETURNS.clear()
    assert asyncio.run(edited(async_main, count_returns)(3)) == asyncio.run(async_main(3))
    assert RETURNS == ["return"]


def _shiftable(inst: Instruction, previous: Instruction | None) -> bool:
    # 3.12's FOR_ITER must target END_FOR; a RESUME after YIELD_VALUE tells the
    # interpreter it is inside `yield from`/`await`; 3.11's PRECALL skips over the CALL
    # right after it (the assembler rejects the first and last)
    if previous is None:
        return True
    return inst.opname not in ("END_FOR", "RESUME") and previous.opname != "PRECALL"


@pytest.mark.parametrize("nops", [1, 40])
def test_padding_moves_every_jump_and_handler(nops: int) -> None:
    """NOPs before (almost) every instruction move all offsets; with 40 each, jumps that
    fit in one byte originally need EXTENDED_ARG."""

    def pad(insts: list[Instruction]) -> None:
        for prev, inst in zip([None, *insts], list(insts), strict=False):
            if _shiftable(inst, prev):
                insert_before(insts, inst, [create_instruction("NOP") for _ in range(nops)])

    for func, cases in [
        (loops, [(0,), (25,)]),
        (closures, [(1,), (2, 3)]),
        (comprehensions, [([1, 2, 3],)]),
        (calls, [(4,)]),
        (exceptions, [(0,), (1,), (2,), (-3,)]),
        (finally_return, [(0,), (-1,), (10,), (7,)]),
        (withs, [(0,), (1,), (2,), (3,)]),
        (matcher, [(0,), ((1, 2, 3),), ("s",)]),
    ]:
        new = edited(func, pad)
        if nops == 40 and func in (loops, exceptions, matcher):
            assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(new))
        for args in cases:
            expected = outcome(func, *args)
            for _ in range(20):  # let the interpreter specialise the padded code
                assert outcome(new, *args) == expected, (func.__name__, args)
    assert drive(edited(gen, pad), 3) == drive(gen, 3)
    assert asyncio.run(edited(async_main, pad)(1)) == asyncio.run(async_main(1))


def test_rename_locals_and_arguments() -> None:
    code = loops.__code__
    renames = {"n": "count", "out": "result", "j": "inner"}
    insts = decode(code)
    for inst in insts:
        if inst.opname in v.LOCAL_OPS and inst.argval in renames:
            inst.argval = renames[inst.argval]
    varnames = tuple(renames.get(name, name) for name in code.co_varnames)
    new_code = assemble(insts, template=code, co_varnames=varnames)
    assert new_code.co_varnames == varnames
    new = function_from(loops, new_code)
    assert new(count=12) == loops(12)
    assert inspect.signature(new).parameters.keys() == {"count"}


def test_new_constants_names_and_locals() -> None:
    """Return (original result, a new constant stored in a new local, a new global,
    a new attribute) from every return of `exceptions`."""
    marker = ("a new", "constant", 3.5, -0.0)

    def edit(insts: list[Instruction]) -> None:
        head = next(i for i in insts if i.opname == "RESUME")
        position = insts.index(head) + 1
        insts[position:position] = [create_load_const(marker), create_store("fresh_local")]
        for ret in [i for i in insts if i.opname in ("RETURN_VALUE", "RETURN_CONST")]:
            extra = [
                create_load_fast("fresh_local"),
                create_load_global("NEW_GLOBAL_MARK"),
                create_load_global("NEW_GLOBAL_MARK"),
                create_instruction("LOAD_ATTR", argval="upper"),
                create_instruction("BUILD_TUPLE", arg=4),
            ]
            if ret.opname == "RETURN_CONST":  # 3.12: the value is not on the stack yet
                extra.insert(0, create_load_const(ret.argval))
                ret.opname, ret.argval, ret.arg = "RETURN_VALUE", None, None
            insert_before(insts, ret, extra)

    new = edited(exceptions, edit)
    code = new.__code__
    assert "fresh_local" in code.co_varnames and "NEW_GLOBAL_MARK" in code.co_names
    assert marker in code.co_consts and "upper" in code.co_names
    for x in (0, 2, -3):
        value, local, glob, attr = new(x)
        assert value == exceptions(x)
        assert local is marker and glob == "marked" and attr() == "MARKED"
    assert outcome(new, 1) == outcome(exceptions, 1)  # raising path unchanged


def create_store(name: str) -> Instruction:
    return create_instruction("STORE_FAST", argval=name)


CO_FUNCTION = inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS


def test_generate_function_with_cells_and_free_vars() -> None:
    """From scratch:
    def made(a):          # a: argument and cell; f: free variable; c: cell
        c = a + f
        def inner(): return (a, c)
        return inner()
    """
    inner_body = [
        create_instruction("LOAD_DEREF", argval="a"),
        create_instruction("LOAD_DEREF", argval="c"),
        create_instruction("BUILD_TUPLE", arg=2),
        create_instruction("RETURN_VALUE"),
    ]
    inner = assemble(
        prefix_instructions([], ["a", "c"]) + inner_body,
        co_name="inner",
        co_qualname="made.<locals>.inner",
        co_freevars=("a", "c"),
        co_flags=CO_FUNCTION | inspect.CO_NESTED,
    )
    body = [
        create_instruction("LOAD_DEREF", argval="a"),
        create_instruction("LOAD_DEREF", argval="f"),
        create_binary_op("+"),
        create_instruction("STORE_DEREF", argval="c"),
        create_instruction("LOAD_CLOSURE", argval="a"),
        create_instruction("LOAD_CLOSURE", argval="c"),
        create_instruction("BUILD_TUPLE", arg=2),
        create_load_const(inner),
        create_instruction("MAKE_FUNCTION", arg=8),  # 8: has a closure tuple
        create_store("inner"),
        create_instruction("PUSH_NULL"),
        create_load_fast("inner"),
        *create_call(0),
        create_instruction("RETURN_VALUE"),
    ]
    insts = prefix_instructions(["a", "c"], ["f"]) + body
    code = assemble(
        insts,
        co_name="made",
        co_argcount=1,
        co_varnames=("a",),
        co_cellvars=("a", "c"),
        co_freevars=("f",),
        co_flags=CO_FUNCTION,
    )
    assert code.co_varnames == ("a", "inner") and code.co_nlocals == 2
    assert code.co_stacksize == stack_depth(insts) == 2
    made = types.FunctionType(code, {}, "made", None, (types.CellType(10),))
    assert made(5) == (5, 15)
    assert made(a=1) == (1, 11)


def test_prefix_matches_compiler() -> None:
    def outer(a):
        b = 1

        def g(c):
            nonlocal b
            yield a + b + c
            return lambda: c

        return g

    g = outer(1).__code__
    decoded = decode(g)
    prefix = prefix_instructions(g.co_cellvars, g.co_freevars, is_generator=True)
    got = [(i.opname, i.argval) for i in prefix]
    assert got == [(i.opname, i.argval) for i in decoded[: len(prefix)]]
    assert got[0] == ("COPY_FREE_VARS", 2) and got[-1] == ("RESUME", 0)


def test_generate_generator() -> None:
    yield_arg = 0 if v.IS_PY312 else None  # 3.12: number of enclosing exception blocks
    body = [
        create_load_fast("x"),
        create_instruction("YIELD_VALUE", arg=yield_arg),
        create_instruction("RESUME", arg=1),
        create_binary_op("*"),
        create_instruction("RETURN_VALUE"),
    ]
    insts = [*prefix_instructions([], [], is_generator=True), create_load_fast("x"), *body]
    code = assemble(
        insts, co_name="twice", co_argcount=1, co_varnames=("x",), co_flags=CO_FUNCTION | 0x20
    )
    g = types.FunctionType(code, {})(7)
    assert next(g) == 7
    with pytest.raises(StopIteration) as stop:
        g.send(3)
    assert stop.value.value == 21


def counting_loop(backward_kind: str, forward_kind: str) -> types.FunctionType:
    """i = 0; do { i += 1 } while i < n; return i  -- written with direction-neutral jumps,
    plus a forward JUMP over dead code and a block placed before its predecessor."""
    ret = create_load_fast("i")
    top = create_load_fast("i")
    entry = create_load_const(0)
    insts = [
        create_instruction("RESUME", arg=0),
        create_jump(forward_kind, entry),  # forward, over the loop placed first
        top,
        create_load_const(1),
        create_binary_op("+="),
        create_store("i"),
        create_load_fast("i"),
        create_load_fast("n"),
        create_instruction("COMPARE_OP", argval="<"),
        create_jump(backward_kind, top),  # backward conditional
        create_jump("JUMP", ret),
        entry,
        create_store("i"),
        create_jump("JUMP", top),  # backward unconditional
        ret,
        create_instruction("RETURN_VALUE"),
    ]
    code = assemble(insts, co_name="loop", co_argcount=1, co_varnames=("n",), co_flags=3)
    return types.FunctionType(code, {})


def test_direction_neutral_jumps() -> None:
    loop = counting_loop("POP_JUMP_IF_TRUE", "JUMP")
    assert [loop(n) for n in (0, 1, 5)] == [1, 1, 5]
    ops = [i.opname for i in dis.get_instructions(loop)]
    if v.IS_PY311:
        assert "POP_JUMP_BACKWARD_IF_TRUE" in ops
    else:  # lowered: jump forward over a JUMP_BACKWARD when the condition is false
        assert "POP_JUMP_IF_FALSE" in ops and "POP_JUMP_IF_TRUE" not in ops
    assert "JUMP_FORWARD" in ops and "JUMP_BACKWARD" in ops
    # a direction-specific spelling pointing the other way is flipped, not rejected
    flipped = counting_loop("POP_JUMP_IF_TRUE", "JUMP_BACKWARD")
    assert flipped(4) == 4


def test_generated_long_jump_needs_extended_arg() -> None:
    target = create_instruction("LOAD_CONST", argval="far")
    insts = [
        create_instruction("RESUME", arg=0),
        create_load_fast("flag"),
        create_jump("POP_JUMP_IF_TRUE", target),
        *[create_instruction("NOP") for _ in range(70000)],
        create_load_const("near"),
        create_instruction("RETURN_VALUE"),
        target,
        create_instruction("RETURN_VALUE"),
    ]
    code = assemble(insts, co_argcount=1, co_varnames=("flag",))
    extended = [i for i in dis.get_instructions(code) if i.opname == "EXTENDED_ARG"]
    assert len(extended) == 2  # 70000 code units need a three-byte oparg
    f = types.FunctionType(code, {})
    assert (f(True), f(False)) == ("far", "near")


def test_call_helpers_match_compiler() -> None:
    def sample(f, x):
        return f(x, 2, key=x, other=3)

    decoded = [(i.opname, i.argval) for i in decode(sample.__code__)]
    made = [(i.opname, i.argval) for i in create_call(4, ("key", "other"))]
    start = decoded.index(made[0])
    assert decoded[start : start + len(made)] == made

    body = [
        create_instruction("RESUME", arg=0),
        create_load_global("sorted", push_null=True),
        create_load_fast("xs"),
        create_load_const(True),
        *create_call(2, ["reverse"]),
        create_load_method("index"),
        create_load_const(2),
        *create_call(1),
        create_instruction("RETURN_VALUE"),
    ]
    code = assemble(body, co_argcount=1, co_varnames=("xs",))
    f = types.FunctionType(code, {"__builtins__": __builtins__})
    assert f([1, 3, 2]) == 1


def test_rot_n_and_compare_helpers() -> None:
    insts = [
        create_instruction("RESUME", arg=0),
        create_load_const(1),
        create_load_const(2),
        create_load_const(3),
        create_load_const(4),
        *create_rot_n(3),
        create_instruction("BUILD_TUPLE", arg=4),
        create_instruction("RETURN_VALUE"),
    ]
    f = types.FunctionType(assemble(insts), {})
    assert f() == (1, 4, 2, 3)
    for op in dis.cmp_op:
        compiled = compile(f"a {op} b", "<cmp>", "eval")
        raw = next(i.arg for i in dis.get_instructions(compiled) if i.opname == "COMPARE_OP")
        assert v.encode_compare(op) == raw
        assert v.decode_compare(raw) == op


def test_stack_depths_and_format() -> None:
    insts = decode(exceptions.__code__)
    depths = stack_depths(insts)
    assert depths[0] == 0
    assert None not in depths  # handlers are reached through the exception table
    for inst, depth in zip(insts, depths, strict=True):
        if inst.opname == "PUSH_EXC_INFO":  # handler entry: unwound stack + exception
            entry_depths = {
                i.exn_tab_entry.depth + i.exn_tab_entry.lasti + 1
                for i in insts
                if i.exn_tab_entry is not None and i.exn_tab_entry.target is inst
            }
            assert entry_depths == {depth}
    assert max(d for d in depths if d is not None) <= stack_depth(insts)
    text = format_instructions(insts)
    assert "->" in text and "exc ->" in text and ">>" in text
    assert len(text.splitlines()) == len(insts)
    fresh = format_instructions([create_jump("JUMP", insts[0]), create_load_const(None)])
    assert "outside" in fresh


def test_positions_are_encoded() -> None:
    """Every line-table form, negative line deltas and an instruction over 8 code units."""
    method = create_load_method("upper")  # 3.11: 11 code units, 3.12: 10
    ops = [
        (create_instruction("RESUME", arg=0), dis.Positions(10, 10, 4, 9)),  # short form
        (create_load_const(1), dis.Positions(12, 12, 100, 120)),  # one-line form
        (create_load_const(2), dis.Positions(5, 7, 0, 300)),  # long form, line goes back
        (create_instruction("NOP"), None),  # no location
        (create_load_const("s"), dis.Positions(5, 5, None, None)),  # line only
        (method, dis.Positions(2000, 2003, 1, 2)),
        (create_instruction("POP_TOP"), dis.Positions(3, 3, 0, 1)),
        (create_instruction("POP_TOP"), dis.Positions(3, 3, 0, 1)),
        (create_instruction("BUILD_TUPLE", arg=2), dis.Positions(0, 0, 0, 0)),
        (create_instruction("RETURN_VALUE"), dis.Positions(1, 1, 1, 1)),
    ]
    for inst, pos in ops:
        inst.positions = pos
    code = assemble([inst for inst, _ in ops], co_firstlineno=10)
    for inst, (_, pos) in zip(decode(code), ops, strict=True):
        assert inst.positions == pos
    units = list(code.co_positions())
    start = next(i.offset for i in decode(code) if i.argval == "upper") // 2
    size = 1 + v.cache_entries(v.OPMAP[method.opname])
    assert size > 8
    assert units[start : start + size] == [(2000, 2003, 1, 2)] * size


def test_argval_only_instructions_assemble() -> None:
    """Instructions created with argval only (arg None) get args computed, and a raw arg
    with no argval indexes the final tables."""
    insts = [
        create_instruction("RESUME", arg=0),
        create_instruction("LOAD_FAST", arg=0),  # raw arg: first local
        create_load_const(UNSET.__class__.__name__),
        create_instruction("BUILD_TUPLE", argval=2),
        create_instruction("RETURN_VALUE"),
    ]
    f = types.FunctionType(assemble(insts, co_argcount=1, co_varnames=("a",)), {})
    assert f(9) == (9, "_Unset")


def test_new_constants_stay_distinct() -> None:
    """1, 1.0 and True are equal but distinct constants, as are 0.0 and -0.0."""
    values = [1, 1.0, True, 0.0, -0.0, (1,), (1.0,), (True,), frozenset({1}), b"1", "1"]
    insts = [create_instruction("RESUME", arg=0)]
    insts += [create_load_const(value) for value in values]
    insts += [
        create_instruction("BUILD_TUPLE", arg=len(values)),
        create_instruction("RETURN_VALUE"),
    ]
    got = types.FunctionType(assemble(insts), {})()
    assert [type(x) for x in got] == [type(x) for x in values]
    assert [repr(x) for x in got] == [repr(x) for x in values]
    assert len(assemble(insts).co_consts) == len(values)
