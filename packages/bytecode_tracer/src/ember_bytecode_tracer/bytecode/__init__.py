"""Bytecode toolkit for CPython 3.11 and 3.12: decode code objects into editable
instructions, build instructions per version, and assemble them back into code objects
(caches, EXTENDED_ARG, exception table, line table and stack size included)."""

from .assemble import assemble
from .decode import decode
from .edit import copy_instructions, insert_before
from .exception_table import encode_exception_table, parse_exception_table
from .formatting import format_instructions
from .helpers import (
    create_binary_op,
    create_call,
    create_jump,
    create_load_attr,
    create_load_const,
    create_load_fast,
    create_load_global,
    create_load_method,
    create_rot_n,
    prefix_instructions,
)
from .instruction import UNSET, ExceptionTableEntry, Instruction, create_instruction
from .line_table import encode_line_table
from .stack_depth import stack_depth, stack_depths
from .version import IS_PY311, IS_PY312, PY_VERSION

__all__ = [
    "IS_PY311",
    "IS_PY312",
    "PY_VERSION",
    "UNSET",
    "ExceptionTableEntry",
    "Instruction",
    "assemble",
    "copy_instructions",
    "create_binary_op",
    "create_call",
    "create_instruction",
    "create_jump",
    "create_load_attr",
    "create_load_const",
    "create_load_fast",
    "create_load_global",
    "create_load_method",
    "create_rot_n",
    "decode",
    "encode_exception_table",
    "encode_line_table",
    "format_instructions",
    "insert_before",
    "parse_exception_table",
    "prefix_instructions",
    "stack_depth",
    "stack_depths",
]
