"""Readable dump of an instruction list (EMBER_LOGS=bytecode)."""

from __future__ import annotations

from collections.abc import Sequence

from .instruction import UNSET, Instruction


def format_instructions(instructions: Sequence[Instruction]) -> str:
    """One line per instruction: index, line, ">>" on jump targets, offset, opname, arg,
    argval, "-> #i" for jumps and "exc -> #i" for the covering handler."""
    index = {id(inst): i for i, inst in enumerate(instructions)}
    targets = {id(inst.target) for inst in instructions if inst.target is not None}
    targets |= {
        id(inst.exn_tab_entry.target) for inst in instructions if inst.exn_tab_entry is not None
    }

    def ref(inst: Instruction) -> str:
        i = index.get(id(inst))
        return f"#{i}" if i is not None else f"<outside: {inst.opname}>"

    lines = []
    for i, inst in enumerate(instructions):
        pos = inst.positions
        line = "" if pos is None or pos.lineno is None else str(pos.lineno)
        mark = ">>" if id(inst) in targets else ""
        offset = "" if inst.offset is None else str(inst.offset)
        text = f"{i:>4} {line:>5} {mark:>2} {offset:>5} {inst.opname:<28}"
        text += "" if inst.arg is None else f"{inst.arg:<6}"
        if inst.target is not None:
            text += f" -> {ref(inst.target)}"
        elif inst.argval is not UNSET and inst.argval is not None and inst.argval != inst.arg:
            text += f" ({inst.argval!r})"
        if inst.push_null:
            text += " +NULL"
        entry = inst.exn_tab_entry
        if entry is not None:
            lasti = " lasti" if entry.lasti else ""
            text += f"   [exc -> {ref(entry.target)} depth={entry.depth}{lasti}]"
        lines.append(text.rstrip())
    return "\n".join(lines)
