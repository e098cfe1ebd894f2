"""The README's opcode table covers every real opcode of the running Python and is current."""

from __future__ import annotations

import opcode
import sys
from pathlib import Path

from ember_bytecode_tracer.translator.opcode_table import OPCODES, markdown
from ember_bytecode_tracer.translator.registry import HANDLERS

VERSION = sys.version_info[:2]


def real_opcodes() -> set[str]:
    specialized = set(getattr(opcode, "_specialized_instructions", ()))
    return {
        name
        for name, number in opcode.opmap.items()
        if number < 256  # 3.12's pseudo-instructions never appear in code objects
        and name not in specialized
        and not name.startswith("INSTRUMENTED_")
    }


def test_table_lists_exactly_the_real_opcodes_of_this_python():
    assert set(OPCODES[VERSION]) == real_opcodes()


def test_every_handler_is_for_a_real_opcode():
    assert set(HANDLERS) - real_opcodes() <= {"JUMP", "JUMP_NO_INTERRUPT"}


def test_readme_table_is_current():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert markdown() in readme, (
        "regenerate: python -m ember_bytecode_tracer.translator.opcode_table"
    )
