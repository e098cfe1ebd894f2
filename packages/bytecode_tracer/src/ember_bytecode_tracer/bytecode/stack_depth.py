"""Maximum stack depth by flow analysis (what co_stacksize must be).

Walks every path from the first instruction: fall-through, jump targets and exception
handlers of covered instructions. Stack effects come from `dis.stack_effect`, the same
table CPython's compiler uses, so compiled code gets its own co_stacksize back.
"""

from __future__ import annotations

import dis

from .instruction import UNSET, Instruction
from .version import (
    COMPARE_OPS,
    CONST_OPS,
    FREE_OPS,
    JUMP_FAMILY_OF,
    LOCAL_OPS,
    NAME_OPS,
    NAME_SHIFT,
    NO_ARG_OPS,
    NO_FALLTHROUGH,
    real_opcode,
)


def _effect_arg(inst: Instruction) -> int | None:
    """An oparg with the same stack effect as the instruction's real one. Only flag bits
    (LOAD_GLOBAL's NULL, 3.12 LOAD_ATTR's method bit) and plain counts matter; indices of
    names and constants do not, so unassembled argval-only instructions work too."""
    opname = inst.opname
    if opname in NO_ARG_OPS:
        return None
    shift = NAME_SHIFT.get(opname)
    if shift is not None:
        if inst.argval is UNSET and inst.arg is not None:
            return inst.arg
        return int(inst.push_null) | (int(inst.super_two_args) << 1 if shift == 2 else 0)
    if (
        opname in CONST_OPS
        or opname in NAME_OPS
        or opname in LOCAL_OPS
        or opname in FREE_OPS
        or opname in COMPARE_OPS
        or opname in JUMP_FAMILY_OF
    ):
        return 0
    if inst.arg is not None:
        return inst.arg
    if isinstance(inst.argval, int):
        return inst.argval
    raise ValueError(f"{inst!r}: needs an integer argument to compute its stack effect")


def _effect(inst: Instruction, jump: bool) -> int:
    if inst.opname == "RETURN_GENERATOR":
        # the compiler adds the generator prefix after computing co_stacksize, so its
        # table says 0; really the frame resumes with the sent value (None) pushed
        return 1
    try:
        return dis.stack_effect(real_opcode(inst.opname), _effect_arg(inst), jump=jump)
    except KeyError:
        raise ValueError(f"unknown opcode name {inst.opname!r} in {inst!r}") from None


def _analyse(instructions: list[Instruction]) -> tuple[list[int | None], int]:
    index = {id(inst): i for i, inst in enumerate(instructions)}
    depth_at: list[int | None] = [None] * len(instructions)
    work: list[int] = []
    max_depth = 0

    def reach(i: int | None, depth: int, via: Instruction) -> None:
        nonlocal max_depth
        if i is None:
            raise ValueError(f"{via!r} leads to an instruction that is not in the list")
        if depth < 0:
            raise ValueError(f"stack underflow after {via!r}")
        max_depth = max(max_depth, depth)
        if i == len(instructions):
            raise ValueError(f"execution falls off the end after {via!r}")
        seen = depth_at[i]
        if seen is None or depth > seen:
            depth_at[i] = depth
            work.append(i)

    if instructions:
        depth_at[0] = 0
        work.append(0)
    while work:
        i = work.pop()
        inst = instructions[i]
        depth = depth_at[i]
        assert depth is not None
        entry = inst.exn_tab_entry
        if entry is not None:
            # the handler starts with the unwound stack, lasti if asked, then the exception
            reach(index.get(id(entry.target)), entry.depth + int(entry.lasti) + 1, inst)
        if inst.opname in JUMP_FAMILY_OF:
            if inst.target is None:
                raise ValueError(f"{inst!r}: jump without a target")
            reach(index.get(id(inst.target)), depth + _effect(inst, jump=True), inst)
        after = depth + _effect(inst, jump=False)
        if inst.opname in NO_FALLTHROUGH:
            max_depth = max(max_depth, after)
        else:
            reach(i + 1, after, inst)
    return depth_at, max_depth


def stack_depth(instructions: list[Instruction]) -> int:
    """Largest stack depth reached on any path (co_stacksize); raises ValueError on stack
    underflow, falling off the end, or a jump/handler that leaves the list."""
    return _analyse(instructions)[1]


def stack_depths(instructions: list[Instruction]) -> list[int | None]:
    """Stack depth on entry to each instruction; None where no path reaches it (dead code,
    e.g. a handler whose try body cannot raise)."""
    return _analyse(instructions)[0]
