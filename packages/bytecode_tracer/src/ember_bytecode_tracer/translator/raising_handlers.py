"""Except clauses that always raise, and do nothing else on the way: their try body may go
into a graph.

LayoutLM's embeddings read ``bbox`` under ``try: ... except IndexError as e: raise
IndexError("...") from e``. Such a handler changes which exception the caller sees, never
whether one is raised, and it has no other effect: an error raised by a graph at run time
(which skips the handler) still reaches the caller as an error. So the tracer keeps tensor
ops under it in the graph, as under a plain ``finally:``. The caller then sees the op's own
error where eager would have raised the handler's.

The handler's code is read from the bytecode: every path from its first instruction, its
own cleanup handlers included, must end in ``RAISE_VARARGS`` or ``RERAISE``, and may only
match the exception, bind it, build builtin exception objects and raise. Anything else (a
call of user code, an attribute read, a ``POP_EXCEPT`` that resumes normal flow, a
``return``) reads as a handler that may catch.
"""

from __future__ import annotations

import builtins
from typing import Any

from ember_bytecode_tracer.bytecode import Instruction
from ember_bytecode_tracer.bytecode.version import NO_FALLTHROUGH

#: what a raising handler may do besides loading builtin exception classes (a tuple of them) and the
#: exception it bound: match, bind and unbind it, build an exception object, raise
_HANDLER_OPS = frozenset(
    {
        "PUSH_EXC_INFO", "CHECK_EXC_MATCH", "NOP", "LOAD_CONST", "STORE_FAST", "DELETE_FAST",
        "POP_TOP", "COPY", "SWAP", "PUSH_NULL", "PRECALL", "CALL", "KW_NAMES", "RAISE_VARARGS",
        "RERAISE", "POP_EXCEPT", "LOAD_GLOBAL", "LOAD_FAST", "BUILD_TUPLE",
    }
)  # fmt: skip
_TERMINAL = frozenset({"RAISE_VARARGS", "RERAISE"})


def _builtin_exception(name: str, f_globals: dict[str, Any], f_builtins: dict[str, Any]) -> bool:
    """Whether ``name`` loads a builtin exception class (a module global of that name
    shadows it: a class of the user's might run code when built)."""
    if name in f_globals:
        return False
    value = f_builtins.get(name)
    return (
        isinstance(value, type)
        and issubclass(value, BaseException)
        and getattr(builtins, name, None) is value
    )


def handler_always_raises(
    instructions: list[Instruction],
    index_of: dict[int, int],
    start: int,
    f_globals: dict[str, Any],
    f_builtins: dict[str, Any],
) -> bool:
    """Whether the handler at ``instructions[start]`` raises on every path with no other
    effect (see the module docstring). ``index_of``: id(instruction) -> its index."""
    stored: set[str] = set()  # the `as e` name: bound by the handler itself
    loaded: set[str] = set()
    pending, seen = [start], set()
    while pending:
        index = pending.pop()
        if index in seen:
            continue
        seen.add(index)
        if index >= len(instructions):
            return False  # ran off the code
        inst = instructions[index]
        if inst.opname not in _HANDLER_OPS and inst.target is None:
            return False
        if inst.opname == "LOAD_GLOBAL" and not _builtin_exception(
            inst.argval, f_globals, f_builtins
        ):
            return False
        if inst.opname == "STORE_FAST":
            stored.add(inst.argval)
        if inst.opname == "LOAD_FAST":
            loaded.add(inst.argval)
        if inst.opname == "POP_EXCEPT" and (
            index + 1 >= len(instructions) or instructions[index + 1].opname != "RERAISE"
        ):
            return False  # the exception is done with: normal flow resumes
        if inst.exn_tab_entry is not None:  # an error here runs the handler's own cleanup
            pending.append(index_of[id(inst.exn_tab_entry.target)])
        if inst.target is not None:
            if not inst.opname.startswith(("POP_JUMP", "JUMP")):
                return False  # FOR_ITER, SEND and the like: not a handler's
            pending.append(index_of[id(inst.target)])
        if inst.opname not in _TERMINAL and inst.opname not in NO_FALLTHROUGH:
            pending.append(index + 1)
    return loaded <= stored  # no local of the user's (a callable, say) read
