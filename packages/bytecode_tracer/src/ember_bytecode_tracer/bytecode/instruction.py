"""The editable instruction type and its constructor.

Instructions compare by identity: jump targets and exception-table entries point at
Instruction objects, so a list can be edited freely and offsets are recomputed only when
it is assembled.
"""

from __future__ import annotations

import dis
from dataclasses import dataclass
from typing import Any

from .version import (
    COMPARE_OPS,
    CONST_OPS,
    FREE_OPS,
    JUMP_FAMILY_OF,
    LOCAL_OPS,
    NAME_OPS,
    NO_ARG_OPS,
    PY_VERSION,
    is_known_opname,
)


class _Unset:
    """Marks "no argval given" (None is a real constant for LOAD_CONST)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(eq=False)
class Instruction:
    """One bytecode instruction, without its CACHE entries and EXTENDED_ARG prefixes.

    For opcodes whose argument names something (constants, names, locals, cells, compare
    operators) `argval` is authoritative: `arg` is only a hint the assembler keeps when it
    still designates the same thing. Jumps use `target`. For other opcodes (BUILD_TUPLE,
    CALL, ...) `arg` and `argval` are the same integer.
    """

    opname: str
    arg: int | None = None
    argval: Any = UNSET
    target: Instruction | None = None
    positions: dis.Positions | None = None
    exn_tab_entry: ExceptionTableEntry | None = None
    offset: int | None = None
    # LOAD_GLOBAL: push NULL first; LOAD_ATTR (3.12) / LOAD_SUPER_ATTR: load a method
    push_null: bool = False
    # LOAD_SUPER_ATTR (3.12) bit 1: super(cls, self) rather than zero-argument super()
    super_two_args: bool = False

    def __repr__(self) -> str:
        parts = [self.opname]
        if self.arg is not None:
            parts.append(f"arg={self.arg}")
        if self.argval is not UNSET and self.argval is not None:
            parts.append(f"argval={self.argval!r}")
        if self.push_null:
            parts.append("push_null")
        if self.target is not None:
            parts.append(f"target={_short(self.target)}")
        if self.offset is not None:
            parts.append(f"offset={self.offset}")
        return f"Instruction({', '.join(parts)})"


@dataclass(eq=False)
class ExceptionTableEntry:
    """A handler covering the instructions `start`..`end` (inclusive).

    The per-instruction `Instruction.exn_tab_entry` is what the assembler encodes;
    `start`/`end` describe the range as decoded and are informational after edits.
    `depth` is the stack depth the handler unwinds to, `lasti` whether it also pushes the
    offset of the raising instruction.
    """

    start: Instruction
    end: Instruction
    target: Instruction
    depth: int
    lasti: bool

    def __repr__(self) -> str:
        return (
            f"ExceptionTableEntry({_short(self.start)}..{_short(self.end)} -> "
            f"{_short(self.target)}, depth={self.depth}, lasti={self.lasti})"
        )


def _short(inst: Instruction) -> str:
    where = f"@{inst.offset}" if inst.offset is not None else f"#{id(inst):x}"
    return f"<{inst.opname}{where}>"


def takes_plain_arg(opname: str) -> bool:
    """Opcodes whose argument is a plain integer (no name/const/jump meaning)."""
    return not (
        opname in CONST_OPS
        or opname in NAME_OPS
        or opname in LOCAL_OPS
        or opname in FREE_OPS
        or opname in COMPARE_OPS
        or opname in JUMP_FAMILY_OF
        or opname in NO_ARG_OPS
    )


def create_instruction(
    opname: str,
    *,
    arg: int | None = None,
    argval: Any = UNSET,
    target: Instruction | None = None,
    push_null: bool = False,
    positions: dis.Positions | None = None,
    exn_tab_entry: ExceptionTableEntry | None = None,
    super_two_args: bool = False,
) -> Instruction:
    """A new instruction for the running Python version.

    `opname` may also be a direction-neutral jump ("JUMP", "JUMP_NO_INTERRUPT",
    "POP_JUMP_IF_TRUE", ...); the assembler picks the forward or backward opcode.
    """
    if not is_known_opname(opname):
        raise ValueError(f"unknown opcode name {opname!r} for Python {PY_VERSION}")
    if opname in NO_ARG_OPS and argval is UNSET:
        argval = None  # as decode() reports it
    elif takes_plain_arg(opname):
        # keep the two spellings of a plain integer argument in step
        if arg is None and isinstance(argval, int):
            arg = argval
        elif arg is not None and argval is UNSET:
            argval = arg
        elif arg is not None and argval != arg:
            raise ValueError(f"{opname}: arg={arg!r} and argval={argval!r} disagree")
    return Instruction(
        opname,
        arg=arg,
        argval=argval,
        target=target,
        positions=positions,
        exn_tab_entry=exn_tab_entry,
        push_null=push_null,
        super_two_args=super_two_args,
    )
