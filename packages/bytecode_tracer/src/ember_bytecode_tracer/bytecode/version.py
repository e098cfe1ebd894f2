"""Version-gated opcode facts for CPython 3.11 and 3.12.

Everything that differs between the two bytecode dialects lives here, so the other modules
ask questions ("which opcode jumps backward for this family?") instead of comparing
version numbers. Numbers and cache counts come from the running interpreter's `opcode`
module; only the semantics CPython does not publish as tables are spelled out.
"""

from __future__ import annotations

import dis
import opcode
import sys
from dataclasses import dataclass

PY_VERSION = sys.version_info[:2]
if PY_VERSION not in ((3, 11), (3, 12)):
    raise ImportError(
        f"ember_bytecode_tracer.bytecode supports CPython 3.11 and 3.12, not {sys.version}"
    )
IS_PY311 = PY_VERSION == (3, 11)
IS_PY312 = PY_VERSION == (3, 12)

EXTENDED_ARG = opcode.EXTENDED_ARG
HAVE_ARGUMENT = opcode.HAVE_ARGUMENT
CACHE = opcode.opmap["CACHE"]

# 3.12 lists instrumented opcodes (>= 237) and compiler pseudo-ops (>= 256) in opmap; neither
# may appear in co_code, and CACHE/EXTENDED_ARG are laid out by the assembler, not by users.
_FIRST_UNREAL = min(getattr(opcode, "MIN_INSTRUMENTED_OPCODE", 256), 256)
OPMAP: dict[str, int] = {
    name: op
    for name, op in opcode.opmap.items()
    if op < _FIRST_UNREAL and name not in ("CACHE", "EXTENDED_ARG")
}
OPNAME: dict[int, str] = {op: name for name, op in OPMAP.items()}


def cache_entries(op: int) -> int:
    """Inline CACHE code units that follow opcode `op` in co_code."""
    return opcode._inline_cache_entries[op]


def _real(ops: list[int]) -> frozenset[str]:
    return frozenset(OPNAME[op] for op in ops if op in OPNAME)


# Argument kinds: what `argval` means for an opcode.
CONST_OPS = _real(opcode.hasconst)  # LOAD_CONST, KW_NAMES (+ RETURN_CONST on 3.12)
NAME_OPS = _real(opcode.hasname)
# Both index "localsplus" (varnames, then cells that are not locals, then free vars).
LOCAL_OPS = _real(opcode.haslocal)
FREE_OPS = _real(opcode.hasfree)
COMPARE_OPS = _real(opcode.hascompare)

# Name opcodes whose oparg is (name index << shift) | flag bits.
NAME_SHIFT: dict[str, int] = {"LOAD_GLOBAL": 1}  # low bit: push NULL before the global
if IS_PY312:
    NAME_SHIFT["LOAD_ATTR"] = 1  # low bit: method load (pushes NULL|self + attribute)
    NAME_SHIFT["LOAD_SUPER_ATTR"] = 2  # bit 0: method load, bit 1: two-argument super()

# 3.12 keeps specialisation hints in the low four bits of COMPARE_OP (the compiler's
# compare_masks); 3.11 uses the plain index into cmp_op.
_COMPARE_MASKS = (2, 10, 8, 7, 4, 12)


def encode_compare(op: str) -> int:
    """COMPARE_OP oparg for comparison `op` ("<", "==", ...)."""
    index = dis.cmp_op.index(op)
    return (index << 4) | _COMPARE_MASKS[index] if IS_PY312 else index


def decode_compare(arg: int) -> str:
    return dis.cmp_op[arg >> 4 if IS_PY312 else arg]


@dataclass(frozen=True)
class JumpFamily:
    """Opcodes that jump the same way, one per direction.

    `backward` None: the family cannot jump backward directly; `inverse` names the family
    with the opposite condition, which lets the assembler lower a backward conditional
    jump into "inverse forward jump over an unconditional JUMP_BACKWARD" (3.12).
    """

    forward: str
    backward: str | None
    inverse: str | None = None


_CONDITIONS = ("FALSE", "TRUE", "NONE", "NOT_NONE")
_INVERSE_CONDITION = {"FALSE": "TRUE", "TRUE": "FALSE", "NONE": "NOT_NONE", "NOT_NONE": "NONE"}

JUMP_FAMILIES: dict[str, JumpFamily] = {
    "JUMP": JumpFamily("JUMP_FORWARD", "JUMP_BACKWARD"),
    "JUMP_NO_INTERRUPT": JumpFamily("JUMP_FORWARD", "JUMP_BACKWARD_NO_INTERRUPT"),
    "FOR_ITER": JumpFamily("FOR_ITER", None),
    "SEND": JumpFamily("SEND", None),
}
for _cond in _CONDITIONS:
    if IS_PY311:
        JUMP_FAMILIES[f"POP_JUMP_IF_{_cond}"] = JumpFamily(
            f"POP_JUMP_FORWARD_IF_{_cond}", f"POP_JUMP_BACKWARD_IF_{_cond}"
        )
    else:
        JUMP_FAMILIES[f"POP_JUMP_IF_{_cond}"] = JumpFamily(
            f"POP_JUMP_IF_{_cond}", None, f"POP_JUMP_IF_{_INVERSE_CONDITION[_cond]}"
        )
if IS_PY311:
    JUMP_FAMILIES["JUMP_IF_TRUE_OR_POP"] = JumpFamily("JUMP_IF_TRUE_OR_POP", None)
    JUMP_FAMILIES["JUMP_IF_FALSE_OR_POP"] = JumpFamily("JUMP_IF_FALSE_OR_POP", None)

# Every opname with a jump target -> its family. Direction-specific spellings and the
# direction-neutral family names (JUMP, POP_JUMP_IF_TRUE on 3.11, ...) are all accepted:
# the assembler picks the real opcode from where the target lies.
JUMP_FAMILY_OF: dict[str, str] = {family: family for family in JUMP_FAMILIES}
for _family, _jf in JUMP_FAMILIES.items():
    for _name in (_jf.forward, _jf.backward):
        if _name is not None:
            JUMP_FAMILY_OF.setdefault(_name, _family)

_relative = _real(opcode.hasjrel)
assert _relative <= JUMP_FAMILY_OF.keys(), sorted(_relative - JUMP_FAMILY_OF.keys())
assert not opcode.hasjabs  # 3.11 and 3.12 only have relative jumps

# 3.12's FOR_ITER skips the END_FOR it targets when the iterator is exhausted, so its
# target must be that END_FOR.
REQUIRED_JUMP_TARGET: dict[str, str] = {"FOR_ITER": "END_FOR"} if IS_PY312 else {}

# 3.11's specialised PRECALLs run the call themselves and then skip a fixed distance over
# the CALL they assume comes next, so nothing may sit between the two.
REQUIRED_NEXT: dict[str, str] = {"PRECALL": "CALL"} if IS_PY311 else {}

BACKWARD_JUMPS = frozenset(name for name in _relative if "JUMP_BACKWARD" in name)

# Opcodes after which execution never falls through to the next instruction.
NO_FALLTHROUGH = frozenset(
    {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP", "JUMP_NO_INTERRUPT"}
    | {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
    | ({"RETURN_CONST"} if IS_PY312 else set())
)

# 3.12's assembler shares line-table entries between consecutive instructions at the same
# position; 3.11's starts a new entry for every instruction.
LINE_TABLE_MERGES = IS_PY312

# Opcodes that carry no argument; their oparg byte is written as given (normally 0).
NO_ARG_OPS = frozenset(name for name, op in OPMAP.items() if op < HAVE_ARGUMENT)


def is_known_opname(opname: str) -> bool:
    return opname in OPMAP or opname in JUMP_FAMILY_OF


def real_opcode(opname: str) -> int:
    """Opcode used for stack effects; a direction-neutral name maps to its forward form."""
    family = JUMP_FAMILY_OF.get(opname)
    if opname not in OPMAP and family is not None:
        opname = JUMP_FAMILIES[family].forward
    return OPMAP[opname]


def localsplus_names(
    varnames: tuple[str, ...], cellvars: tuple[str, ...], freevars: tuple[str, ...]
) -> list[str]:
    """Names of the frame's fast slots in oparg order, as CodeType builds them: locals,
    then cells that are not also locals (a cell that is a local shares its slot), then
    free variables. LOAD_FAST, LOAD_DEREF, MAKE_CELL, ... all index this list."""
    merged = set(varnames)
    return [*varnames, *(name for name in cellvars if name not in merged), *freevars]
