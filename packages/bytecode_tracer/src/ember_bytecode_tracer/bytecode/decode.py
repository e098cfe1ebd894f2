"""Code object -> list of Instruction (no CACHE, no EXTENDED_ARG, jumps resolved)."""

from __future__ import annotations

import bisect
import dis
import types

from .exception_table import parse_exception_table
from .instruction import ExceptionTableEntry, Instruction
from .operands import decode_argval
from .version import (
    BACKWARD_JUMPS,
    EXTENDED_ARG,
    JUMP_FAMILY_OF,
    NO_ARG_OPS,
    OPNAME,
    cache_entries,
    localsplus_names,
)


def _positions(raw: tuple[int | None, ...]) -> dis.Positions | None:
    return None if raw[0] is None else dis.Positions(*raw)


def decode(code: types.CodeType) -> list[Instruction]:
    """Decode `code.co_code` into editable instructions.

    Each instruction carries its argval (constant, name, local, comparison, ...), its jump
    `target`, its source `positions`, its `exn_tab_entry` and the byte `offset` of its
    opcode (after any EXTENDED_ARG prefix).
    """
    raw = code.co_code
    positions = list(code.co_positions())
    slots = localsplus_names(code.co_varnames, code.co_cellvars, code.co_freevars)
    insts: list[Instruction] = []
    starts: list[int] = []  # byte offset of each instruction's first unit (its prefix)
    by_start: dict[int, Instruction] = {}
    ends: list[int] = []  # byte offset just past each instruction's caches
    ext, prefix_start, i = 0, None, 0
    while i < len(raw):
        op, byte = raw[i], raw[i + 1]
        if prefix_start is None:
            prefix_start = i
        if op == EXTENDED_ARG:
            ext = (ext | byte) << 8
            i += 2
            continue
        if op not in OPNAME:
            raise ValueError(f"{code.co_name}: unknown opcode {op} at offset {i}")
        arg = ext | byte
        opname = OPNAME[op]
        inst = Instruction(opname, offset=i, positions=_positions(positions[i // 2]))
        inst.arg = None if opname in NO_ARG_OPS and arg == 0 else arg
        decode_argval(inst, arg, code, slots)
        insts.append(inst)
        starts.append(prefix_start)
        by_start[prefix_start] = inst
        i += 2 * (1 + cache_entries(op))
        ends.append(i)
        ext, prefix_start = 0, None
    if prefix_start is not None:
        raise ValueError(f"{code.co_name}: code ends inside an EXTENDED_ARG prefix")

    def at(offset: int, what: str) -> Instruction:
        inst = by_start.get(offset)
        if inst is None:
            raise ValueError(f"{code.co_name}: {what} offset {offset} is not an instruction")
        return inst

    for inst, end in zip(insts, ends, strict=True):
        if inst.opname in JUMP_FAMILY_OF:
            assert inst.arg is not None
            delta = -inst.arg if inst.opname in BACKWARD_JUMPS else inst.arg
            inst.target = at(end + 2 * delta, f"jump target of {inst.opname}@{inst.offset}")
            inst.argval = inst.target.offset

    for row in parse_exception_table(code.co_exceptiontable):
        first = bisect.bisect_left(starts, 2 * row.start)
        last = bisect.bisect_left(starts, 2 * row.end) - 1
        boundary = starts[last + 1] if last + 1 < len(starts) else ends[-1]
        if first > last or starts[first] != 2 * row.start or boundary != 2 * row.end:
            raise ValueError(f"{code.co_name}: exception table range {row} splits instructions")
        entry = ExceptionTableEntry(
            insts[first],
            insts[last],
            at(2 * row.target, "exception handler"),
            row.depth,
            row.lasti,
        )
        for inst in insts[first : last + 1]:
            inst.exn_tab_entry = entry
    return insts
