"""Edits that keep jump targets and exception-table entries consistent."""

from __future__ import annotations

import dataclasses

from .instruction import ExceptionTableEntry, Instruction


def copy_instructions(instructions: list[Instruction]) -> list[Instruction]:
    """Copies whose targets and exception entries point at the copies (references to
    instructions outside the list are kept as they are)."""
    copies = {id(old): dataclasses.replace(old) for old in instructions}

    def moved(inst: Instruction) -> Instruction:
        return copies.get(id(inst), inst)

    entries: dict[int, ExceptionTableEntry] = {}
    for old in instructions:
        new = copies[id(old)]
        if old.target is not None:
            new.target = moved(old.target)
        entry = old.exn_tab_entry
        if entry is not None:
            if id(entry) not in entries:
                entries[id(entry)] = ExceptionTableEntry(
                    moved(entry.start),
                    moved(entry.end),
                    moved(entry.target),
                    entry.depth,
                    entry.lasti,
                )
            new.exn_tab_entry = entries[id(entry)]
    return [copies[id(old)] for old in instructions]


def insert_before(
    instructions: list[Instruction], anchor: Instruction, new: list[Instruction]
) -> None:
    """Insert `new` before `anchor` so it runs whenever `anchor` would: jumps and handlers
    aimed at `anchor` now land on new[0], and inserted instructions without an
    exception entry get the anchor's (they sit inside the same try block).

    Some neighbours must stay adjacent: 3.12's FOR_ITER targets its END_FOR, 3.11's
    PRECALL is directly followed by CALL (both checked by the assembler), and a RESUME
    after YIELD_VALUE marks `yield from`/`await` (not checked)."""
    if not new:
        return
    position = next((i for i, inst in enumerate(instructions) if inst is anchor), None)
    if position is None:
        raise ValueError(f"{anchor!r} is not in the instruction list")
    head = new[0]
    for inst in instructions:
        if inst.target is anchor:
            inst.target = head
        entry = inst.exn_tab_entry
        if entry is not None:
            if entry.target is anchor:
                entry.target = head
            if entry.start is anchor:
                entry.start = head
    for inst in new:
        if inst.exn_tab_entry is None:
            inst.exn_tab_entry = anchor.exn_tab_entry
    instructions[position:position] = new
