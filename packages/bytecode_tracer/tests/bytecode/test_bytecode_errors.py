"""Bad instructions fail with a clear error naming the instruction, and the low-level
tables encode/decode consistently."""

from __future__ import annotations

import re

import pytest

from ember_bytecode_tracer.bytecode import (
    ExceptionTableEntry,
    Instruction,
    assemble,
    create_call,
    create_instruction,
    create_jump,
    create_load_const,
    create_rot_n,
    decode,
    encode_exception_table,
    parse_exception_table,
    stack_depth,
)
from ember_bytecode_tracer.bytecode import version as v
from ember_bytecode_tracer.bytecode.exception_table import RawEntry


def resume() -> Instruction:
    return create_instruction("RESUME", arg=0)


def ret() -> Instruction:
    return create_instruction("RETURN_VALUE")


def assemble_body(*body: Instruction, **fields) -> None:
    assemble([resume(), *body], **fields)


def test_unknown_opname() -> None:
    with pytest.raises(ValueError, match="unknown opcode name 'LOAD_FASTEST'"):
        create_instruction("LOAD_FASTEST")
    with pytest.raises(ValueError, match=r"#1 BOGUS.*unknown opcode name"):
        assemble_body(Instruction("BOGUS"), ret())
    missing = "LOAD_METHOD" if v.IS_PY312 else "RETURN_CONST"  # exists only on the other
    with pytest.raises(ValueError, match=missing):
        assemble_body(Instruction(missing, argval="x"), ret())
    for reserved in ("CACHE", "EXTENDED_ARG"):  # laid out by the assembler only
        with pytest.raises(ValueError, match=reserved):
            create_instruction(reserved, arg=0)


@pytest.mark.parametrize(
    ("inst", "error", "pattern"),
    [
        (Instruction("LOAD_FAST", argval=3), TypeError, "LOAD_FAST.*must be a name"),
        (Instruction("LOAD_GLOBAL", argval=None), TypeError, "LOAD_GLOBAL.*must be a name"),
        (Instruction("LOAD_GLOBAL"), ValueError, "LOAD_GLOBAL.*needs an argval"),
        (Instruction("LOAD_DEREF", argval="nope"), ValueError, "LOAD_DEREF.*not a cell"),
        (Instruction("LOAD_DEREF", argval="plain"), ValueError, "LOAD_DEREF.*not a cell"),
        (Instruction("COMPARE_OP", argval="<>"), ValueError, "COMPARE_OP.*unknown comparison"),
        (Instruction("KW_NAMES", argval=("a", 1)), TypeError, "KW_NAMES.*tuple of str"),
        (Instruction("BUILD_TUPLE"), ValueError, "BUILD_TUPLE.*needs an integer"),
        (Instruction("BUILD_TUPLE", argval="2"), TypeError, "BUILD_TUPLE.*must be an int"),
        (Instruction("BUILD_TUPLE", arg=1, argval=2), ValueError, "BUILD_TUPLE.*disagree"),
        (Instruction("BUILD_TUPLE", arg=-1), TypeError, "BUILD_TUPLE.*non-negative"),
        (Instruction("BUILD_TUPLE", arg=2**32), ValueError, "BUILD_TUPLE.*32 bits"),
        (Instruction("LOAD_FAST", arg=2), ValueError, "#1: LOAD_FAST.*out of range"),
        (Instruction("LOAD_CONST", arg=99), ValueError, "LOAD_CONST.*out of range"),
    ],
)
def test_unencodable_argval(inst: Instruction, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        assemble_body(inst, ret(), co_varnames=("plain",), co_cellvars=("cell",))


def test_jump_errors() -> None:
    with pytest.raises(ValueError, match=r"#1 JUMP_FORWARD.*jump target is not in the list"):
        assemble_body(Instruction("JUMP_FORWARD"), ret())
    stranger = create_load_const(None)
    with pytest.raises(ValueError, match=r"#1 JUMP.*not in the list"):
        assemble_body(create_jump("JUMP", stranger), ret())
    with pytest.raises(ValueError, match="is not a jump"):
        create_jump("NOP", stranger)
    loop_top = create_instruction("NOP")
    back_iter = Instruction("FOR_ITER", target=loop_top)
    pattern = "must jump to END_FOR" if v.IS_PY312 else "FOR_ITER cannot jump backward"
    with pytest.raises(ValueError, match=pattern):
        assemble_body(loop_top, back_iter, ret())
    if v.IS_PY311:
        with pytest.raises(ValueError, match="JUMP_IF_TRUE_OR_POP cannot jump backward"):
            assemble_body(loop_top, Instruction("JUMP_IF_TRUE_OR_POP", target=loop_top), ret())
    else:  # nothing follows the JUMP_BACKWARD the lowering would need to skip to
        cond = create_jump("POP_JUMP_IF_TRUE", loop_top)
        with pytest.raises(ValueError, match="backward conditional jump at the end"):
            assemble_body(loop_top, create_load_const(True), cond)


@pytest.mark.skipif(not v.IS_PY311, reason="PRECALL exists on 3.11 only")
def test_precall_must_precede_call() -> None:
    head = [resume(), create_instruction("PUSH_NULL"), create_load_const(print)]
    precall, call = create_call(0)
    with pytest.raises(ValueError, match=r"#3 PRECALL.*followed directly by CALL"):
        assemble([*head, precall, create_instruction("NOP"), call, ret()])
    assemble([*head, precall, call, ret()])


def test_exception_handler_outside_list() -> None:
    insts = [resume(), create_load_const(None), ret()]
    outside = create_instruction("NOP")
    insts[1].exn_tab_entry = ExceptionTableEntry(insts[1], insts[1], outside, 0, False)
    with pytest.raises(ValueError, match="not in the list"):
        assemble(insts)


def test_stack_errors() -> None:
    with pytest.raises(ValueError, match=r"stack underflow after Instruction\(POP_TOP"):
        assemble_body(create_instruction("POP_TOP"), create_load_const(None), ret())
    with pytest.raises(ValueError, match=r"falls off the end after Instruction\(NOP"):
        stack_depth([resume(), create_instruction("NOP")])
    with pytest.raises(ValueError, match="at least one instruction"):
        assemble([])


def test_bad_code_fields() -> None:
    with pytest.raises(TypeError, match=re.escape("cannot set ['co_code']")):
        assemble([resume(), create_load_const(None), ret()], co_code=b"")


def test_helper_argument_checks() -> None:
    with pytest.raises(ValueError, match="3 keyword names for 2 arguments"):
        create_call(2, ["a", "b", "c"])
    with pytest.raises(ValueError, match="n >= 1"):
        create_rot_n(0)
    assert create_rot_n(1) == []
    with pytest.raises(ValueError, match="disagree"):
        create_instruction("BUILD_LIST", arg=1, argval=2)


def test_decode_rejects_malformed_code() -> None:
    def f(x):
        return len(x)

    code = f.__code__
    with pytest.raises(ValueError, match="EXTENDED_ARG"):
        decode(code.replace(co_code=code.co_code + bytes((v.EXTENDED_ARG, 1))))
    # unit 1 starts LOAD_GLOBAL, whose caches fill units 2..; a range ending at unit 2
    # splits it, and a handler at unit 2 points into the caches
    assert decode(code)[1].opname == "LOAD_GLOBAL"
    split = encode_exception_table([RawEntry(1, 2, 1, 0, False)])
    with pytest.raises(ValueError, match="splits instructions"):
        decode(code.replace(co_exceptiontable=split))
    into_cache = encode_exception_table([RawEntry(0, 1, 2, 0, False)])
    with pytest.raises(ValueError, match="exception handler offset 4 is not an instruction"):
        decode(code.replace(co_exceptiontable=into_cache))


def test_exception_table_round_trip() -> None:
    rows = [
        RawEntry(0, 1, 5, 0, False),
        RawEntry(3, 70, 200, 3, True),
        RawEntry(100_000, 100_001, 2**20 + 7, 17, False),
    ]
    assert parse_exception_table(encode_exception_table(rows)) == rows
    with pytest.raises(ValueError, match="empty exception table range"):
        encode_exception_table([RawEntry(4, 4, 0, 0, False)])
    with pytest.raises(ValueError, match="truncated"):
        parse_exception_table(encode_exception_table(rows)[:-1])
