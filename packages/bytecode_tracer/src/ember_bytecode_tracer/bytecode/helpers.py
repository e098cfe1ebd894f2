"""Constructors for the instruction sequences a code generator emits, per Python version."""

from __future__ import annotations

import opcode
from collections.abc import Sequence
from typing import Any

from .instruction import Instruction, create_instruction
from .version import IS_PY311, IS_PY312, JUMP_FAMILIES, JUMP_FAMILY_OF, PY_VERSION

_BINARY_OPS = {symbol: i for i, (_, symbol) in enumerate(opcode._nb_ops)}


def create_load_const(value: Any) -> Instruction:
    return create_instruction("LOAD_CONST", argval=value)


def create_load_global(name: str, push_null: bool = False) -> Instruction:
    """LOAD_GLOBAL; with `push_null` a NULL goes below the global, ready for a call."""
    return create_instruction("LOAD_GLOBAL", argval=name, push_null=push_null)


def create_load_attr(name: str) -> Instruction:
    return create_instruction("LOAD_ATTR", argval=name)


def create_load_method(name: str) -> Instruction:
    """Pushes (method, self) or (NULL, attribute) for a following call: LOAD_METHOD on
    3.11, LOAD_ATTR with its method bit on 3.12."""
    if IS_PY311:
        return create_instruction("LOAD_METHOD", argval=name)
    return create_instruction("LOAD_ATTR", argval=name, push_null=True)


def create_load_fast(name: str, *, maybe_unbound: bool = False) -> Instruction:
    """3.12's LOAD_FAST trusts the slot is bound; LOAD_FAST_CHECK raises
    UnboundLocalError instead. 3.11's LOAD_FAST always checks."""
    if maybe_unbound and IS_PY312:
        return create_instruction("LOAD_FAST_CHECK", argval=name)
    return create_instruction("LOAD_FAST", argval=name)


def create_binary_op(symbol: str) -> Instruction:
    """BINARY_OP for "+", "//", "+=" (in-place forms end in "="), ..."""
    if symbol not in _BINARY_OPS:
        raise ValueError(f"unknown binary operator {symbol!r}; known: {sorted(_BINARY_OPS)}")
    return create_instruction("BINARY_OP", arg=_BINARY_OPS[symbol])


def create_call(nargs: int, kw_names: Sequence[str] | None = None) -> list[Instruction]:
    """Call with the stack holding NULL|self, callable... in version order, then `nargs`
    arguments, the last len(kw_names) of them passed by keyword.

    3.11: [KW_NAMES] PRECALL n, CALL n; 3.12: [KW_NAMES] CALL n.
    """
    out = []
    if kw_names:
        if len(kw_names) > nargs:
            raise ValueError(f"{len(kw_names)} keyword names for {nargs} arguments")
        out.append(create_instruction("KW_NAMES", argval=tuple(kw_names)))
    if IS_PY311:
        out.append(create_instruction("PRECALL", arg=nargs))
    out.append(create_instruction("CALL", arg=nargs))
    return out


def create_jump(kind: str, target: Instruction) -> Instruction:
    """A jump to `target`. `kind` is a direction-neutral family ("JUMP",
    "JUMP_NO_INTERRUPT", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_NONE",
    "POP_JUMP_IF_NOT_NONE", "FOR_ITER", ...) or any real jump opname; the assembler picks
    the forward or backward opcode from where `target` ends up (and on 3.12 lowers a
    backward conditional jump to a forward one over a JUMP_BACKWARD)."""
    if kind not in JUMP_FAMILY_OF:
        families = sorted(JUMP_FAMILIES)
        raise ValueError(f"{kind!r} is not a jump on Python {PY_VERSION}; use {families}")
    return create_instruction(kind, target=target)


def create_rot_n(n: int) -> list[Instruction]:
    """Move the top of stack down to position n, lifting the n-1 items above it (ROT_N of
    3.10), as SWAPs."""
    if n < 1:
        raise ValueError(f"create_rot_n needs n >= 1, got {n}")
    return [create_instruction("SWAP", arg=i) for i in range(n, 1, -1)]


def prefix_instructions(
    cellvars: Sequence[str], freevars: Sequence[str], is_generator: bool = False
) -> list[Instruction]:
    """The frame set-up every 3.11/3.12 function starts with: COPY_FREE_VARS for the
    closure, MAKE_CELL per cell variable (also for arguments that are cells),
    RETURN_GENERATOR + POP_TOP for generators/coroutines/async generators, then RESUME 0."""
    out = []
    if freevars:
        out.append(create_instruction("COPY_FREE_VARS", arg=len(freevars)))
    out += [create_instruction("MAKE_CELL", argval=name) for name in cellvars]
    if is_generator:
        out += [create_instruction("RETURN_GENERATOR"), create_instruction("POP_TOP")]
    out.append(create_instruction("RESUME", arg=0))
    return out
