"""List of Instruction -> code object.

Steps: grow the constant/name/local tables for the instructions' argvals, lower each
instruction to real opcodes (picking jump directions), lay out code units with CACHE
entries and EXTENDED_ARG prefixes until jump arguments stop changing, then encode the
exception table, the line table and the stack size.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from .exception_table import RawEntry, encode_exception_table
from .instruction import ExceptionTableEntry, Instruction
from .line_table import encode_line_table
from .operands import MAX_ARG, CodeTables, collect_locals, encode_arg
from .stack_depth import stack_depth
from .version import (
    BACKWARD_JUMPS,
    EXTENDED_ARG,
    JUMP_FAMILIES,
    JUMP_FAMILY_OF,
    OPMAP,
    PY_VERSION,
    REQUIRED_JUMP_TARGET,
    REQUIRED_NEXT,
    cache_entries,
    is_known_opname,
)

# Fields of CodeType.replace() a caller may override; the rest are computed.
_OVERRIDABLE = frozenset(
    {
        "co_argcount",
        "co_posonlyargcount",
        "co_kwonlyargcount",
        "co_stacksize",
        "co_flags",
        "co_firstlineno",
        "co_consts",
        "co_names",
        "co_varnames",
        "co_freevars",
        "co_cellvars",
        "co_filename",
        "co_name",
        "co_qualname",
    }
)


def _blank() -> None:
    pass


# From-scratch code starts from a plain function's code with everything emptied.
_BLANK_TEMPLATE = _blank.__code__.replace(
    co_consts=(),
    co_names=(),
    co_varnames=(),
    co_filename="<ember>",
    co_name="<ember>",
    co_qualname="<ember>",
    co_firstlineno=1,
)


@dataclass
class _Unit:
    """One real instruction to lay out (a lowered Instruction yields one or two)."""

    source: Instruction
    op: int
    arg: int  # final for non-jumps; recomputed by layout for jumps
    target: int | None = None  # index of the unit jumped to
    backward: bool = False
    ext: int = 0  # EXTENDED_ARG prefixes

    @property
    def size(self) -> int:
        return self.ext + 1 + cache_entries(self.op)


def _ext_needed(arg: int) -> int:
    return (arg > 0xFF) + (arg > 0xFFFF) + (arg > 0xFF_FFFF)


def _describe(inst: Instruction, i: int) -> str:
    where = f", decoded at offset {inst.offset}" if inst.offset is not None else ""
    return f"instruction #{i} {inst.opname}{where}"


def _lower(instructions: list[Instruction], tables: CodeTables) -> list[_Unit]:
    """Real opcodes and args; jump directions follow from where the target lies."""
    index = {id(inst): i for i, inst in enumerate(instructions)}
    plan: list[tuple[str, bool]] = []  # (real opname, lowered to two units)
    first_unit: list[int] = []
    count = 0
    for i, inst in enumerate(instructions):
        if not is_known_opname(inst.opname):
            raise ValueError(f"{_describe(inst, i)}: unknown opcode name for Python {PY_VERSION}")
        opname, lowered = inst.opname, False
        required_next = REQUIRED_NEXT.get(opname)
        if required_next is not None and (
            i + 1 == len(instructions) or instructions[i + 1].opname != required_next
        ):
            raise ValueError(f"{_describe(inst, i)}: must be followed directly by {required_next}")
        family_name = JUMP_FAMILY_OF.get(opname)
        if family_name is not None:
            if inst.target is None or id(inst.target) not in index:
                raise ValueError(f"{_describe(inst, i)}: jump target is not in the list")
            family = JUMP_FAMILIES[family_name]
            required = REQUIRED_JUMP_TARGET.get(family_name)
            if required is not None and inst.target.opname != required:
                raise ValueError(f"{_describe(inst, i)}: must jump to {required}")
            if index[id(inst.target)] > i:
                opname = family.forward
            elif family.backward is not None:
                opname = family.backward
            elif family.inverse is not None:
                opname, lowered = JUMP_FAMILIES[family.inverse].forward, True
            else:
                raise ValueError(
                    f"{_describe(inst, i)}: {family_name} cannot jump backward on "
                    f"Python {PY_VERSION}"
                )
        plan.append((opname, lowered))
        first_unit.append(count)
        count += 2 if lowered else 1

    units: list[_Unit] = []
    for i, (inst, (opname, lowered)) in enumerate(zip(instructions, plan, strict=True)):
        op = OPMAP[opname]
        if inst.opname not in JUMP_FAMILY_OF:
            try:
                arg = encode_arg(inst, tables)
            except (TypeError, ValueError) as e:
                raise type(e)(f"instruction #{i}: {e}") from None
            units.append(_Unit(inst, op, arg))
            continue
        assert inst.target is not None
        target = first_unit[index[id(inst.target)]]
        if not lowered:
            units.append(_Unit(inst, op, 0, target, opname in BACKWARD_JUMPS))
            continue
        # 3.12 has no backward conditional jump: jump forward over a JUMP_BACKWARD when
        # the condition does not hold
        after = first_unit[i] + 2
        if after >= count:
            raise ValueError(f"{_describe(inst, i)}: backward conditional jump at the end")
        units.append(_Unit(inst, op, 0, after))
        units.append(_Unit(inst, OPMAP["JUMP_BACKWARD"], 0, target, backward=True))
    return units


def _layout(units: list[_Unit]) -> list[int]:
    """Unit offsets (in code units) once every jump argument fits its EXTENDED_ARGs."""
    for unit in units:
        if unit.target is None:
            unit.ext = _ext_needed(unit.arg)
    while True:
        offsets, total = [], 0
        for unit in units:
            offsets.append(total)
            total += unit.size
        changed = False
        for i, unit in enumerate(units):
            if unit.target is None:
                continue
            end, goal = offsets[i] + unit.size, offsets[unit.target]
            unit.arg = end - goal if unit.backward else goal - end
            assert unit.arg >= 0, "jump direction chosen from list order"
            if unit.arg > MAX_ARG:
                raise ValueError(f"{unit.source!r}: jump of {unit.arg} code units is too long")
            # sizes only grow, so this settles; never shrinking rules out oscillation
            need = _ext_needed(unit.arg)
            if need > unit.ext:
                unit.ext, changed = need, True
        if not changed:
            return offsets


def _emit(units: list[_Unit]) -> bytes:
    out = bytearray()
    for unit in units:
        for shift in range(8 * unit.ext, 0, -8):
            out += bytes((EXTENDED_ARG, (unit.arg >> shift) & 0xFF))
        out += bytes((unit.op, unit.arg & 0xFF))
        out += bytes(2 * cache_entries(unit.op))
    return bytes(out)


def _exception_rows(
    units: list[_Unit], offsets: list[int], handler_unit: dict[int, int]
) -> list[RawEntry]:
    """Maximal runs of consecutive units under the same handler, as CPython emits them."""
    rows: list[RawEntry] = []
    run_key: tuple[int, int, bool] | None = None
    run_start = 0
    for i, unit in enumerate([*units, None]):
        entry: ExceptionTableEntry | None = unit.source.exn_tab_entry if unit else None
        key = None
        if entry is not None:
            if id(entry.target) not in handler_unit:
                raise ValueError(f"{unit.source!r}: exception handler target is not in the list")
            key = (handler_unit[id(entry.target)], entry.depth, bool(entry.lasti))
        if key == run_key:
            continue
        end = offsets[i] if i < len(units) else offsets[-1] + units[-1].size
        if run_key is not None:
            target, depth, lasti = run_key
            rows.append(RawEntry(run_start, end, offsets[target], depth, lasti))
        run_key, run_start = key, end
    return rows


def assemble(
    instructions: list[Instruction],
    *,
    template: types.CodeType | None = None,
    **code_fields: Any,
) -> types.CodeType:
    """Build a code object running `instructions`.

    Tables and metadata come from `template` (a blank function code when None), with
    `code_fields` (co_name, co_varnames, co_flags, ...) overriding it. Constants, names
    and locals the instructions need but the tables lack are appended. The instruction
    list is not modified.
    """
    unknown = set(code_fields) - _OVERRIDABLE
    if unknown:
        raise TypeError(f"assemble() cannot set {sorted(unknown)}; allowed: {sorted(_OVERRIDABLE)}")
    base = template if template is not None else _BLANK_TEMPLATE
    field = {name: code_fields.get(name, getattr(base, name)) for name in _OVERRIDABLE}
    tables = CodeTables(
        tuple(field["co_consts"]),
        tuple(field["co_names"]),
        tuple(field["co_varnames"]),
        tuple(field["co_cellvars"]),
        tuple(field["co_freevars"]),
    )
    for inst in instructions:
        collect_locals(inst, tables)
    tables.freeze_locals()

    if not instructions:
        raise ValueError("assemble() needs at least one instruction")
    units = _lower(instructions, tables)
    offsets = _layout(units)
    handler_unit: dict[int, int] = {}  # id(instruction) -> its first unit
    for i, unit in enumerate(units):
        handler_unit.setdefault(id(unit.source), i)

    if "co_stacksize" not in code_fields:
        field["co_stacksize"] = stack_depth(instructions)
    field.update(
        co_code=_emit(units),
        co_consts=tuple(tables.consts),
        co_names=tuple(tables.names),
        co_varnames=tuple(tables.varnames),
        co_nlocals=len(tables.varnames),
        co_exceptiontable=encode_exception_table(_exception_rows(units, offsets, handler_unit)),
        co_linetable=encode_line_table(
            ((unit.source.positions, unit.size) for unit in units), field["co_firstlineno"]
        ),
    )
    return base.replace(**field)
