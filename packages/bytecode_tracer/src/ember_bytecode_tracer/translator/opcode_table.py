"""The opcode table of the README: every opcode of 3.11 and 3.12 that can appear in an
ordinary function, and whether the tracer handles it or breaks the graph there.

    python -m ember_bytecode_tracer.translator.opcode_table            # print it
    python -m ember_bytecode_tracer.translator.opcode_table --write README.md
"""

from __future__ import annotations

from ember_bytecode_tracer.translator import handlers  # noqa: F401  (registers them)
from ember_bytecode_tracer.translator.registry import handled_on

# Real (non-specialized, non-instrumented) opcodes of each version, as `opcode` lists them.
# Kept here as data so the table is the same whichever Python prints it.
_BOTH = """
    BEFORE_ASYNC_WITH BEFORE_WITH BINARY_OP BINARY_SUBSCR BUILD_CONST_KEY_MAP BUILD_LIST
    BUILD_MAP BUILD_SET BUILD_SLICE BUILD_STRING BUILD_TUPLE CACHE CALL CALL_FUNCTION_EX
    CHECK_EG_MATCH CHECK_EXC_MATCH COMPARE_OP CONTAINS_OP COPY COPY_FREE_VARS DELETE_ATTR
    DELETE_DEREF DELETE_FAST DELETE_GLOBAL DELETE_NAME DELETE_SUBSCR DICT_MERGE DICT_UPDATE
    END_ASYNC_FOR EXTENDED_ARG FORMAT_VALUE FOR_ITER GET_AITER GET_ANEXT GET_AWAITABLE
    GET_ITER GET_LEN GET_YIELD_FROM_ITER IMPORT_FROM IMPORT_NAME IS_OP JUMP_BACKWARD
    JUMP_BACKWARD_NO_INTERRUPT JUMP_FORWARD KW_NAMES LIST_APPEND LIST_EXTEND
    LOAD_ASSERTION_ERROR LOAD_ATTR LOAD_BUILD_CLASS LOAD_CLOSURE LOAD_CONST LOAD_DEREF
    LOAD_FAST LOAD_GLOBAL LOAD_NAME MAKE_CELL MAKE_FUNCTION MAP_ADD MATCH_CLASS MATCH_KEYS
    MATCH_MAPPING MATCH_SEQUENCE NOP POP_EXCEPT POP_TOP PUSH_EXC_INFO PUSH_NULL
    RAISE_VARARGS RERAISE RESUME RETURN_GENERATOR RETURN_VALUE SEND SETUP_ANNOTATIONS
    SET_ADD SET_UPDATE STORE_ATTR STORE_DEREF STORE_FAST STORE_GLOBAL STORE_NAME
    STORE_SUBSCR SWAP UNARY_INVERT UNARY_NEGATIVE UNARY_NOT UNPACK_EX UNPACK_SEQUENCE
    WITH_EXCEPT_START YIELD_VALUE
""".split()  # noqa: SIM905 - a word list reads better than 90 quoted names
OPCODES = {
    (3, 11): sorted(
        _BOTH
        + """
        ASYNC_GEN_WRAP IMPORT_STAR JUMP_IF_FALSE_OR_POP JUMP_IF_TRUE_OR_POP LIST_TO_TUPLE
        LOAD_CLASSDEREF LOAD_METHOD POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_NONE
        POP_JUMP_BACKWARD_IF_NOT_NONE POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_FORWARD_IF_FALSE
        POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE POP_JUMP_FORWARD_IF_TRUE PRECALL
        PREP_RERAISE_STAR PRINT_EXPR UNARY_POSITIVE
    """.split()  # noqa: SIM905 - a word list reads better than 90 quoted names
    ),
    (3, 12): sorted(
        _BOTH
        + """
        BINARY_SLICE CALL_INTRINSIC_1 CALL_INTRINSIC_2 CLEANUP_THROW END_FOR END_SEND
        INTERPRETER_EXIT LOAD_FAST_AND_CLEAR LOAD_FAST_CHECK LOAD_FROM_DICT_OR_DEREF
        LOAD_FROM_DICT_OR_GLOBALS LOAD_LOCALS LOAD_SUPER_ATTR POP_JUMP_IF_FALSE POP_JUMP_IF_NONE
        POP_JUMP_IF_NOT_NONE POP_JUMP_IF_TRUE RESERVED RETURN_CONST STORE_SLICE
    """.split()  # noqa: SIM905 - a word list reads better than 90 quoted names
    ),
}


def status(opname: str, version: tuple[int, int]) -> str:
    if opname not in OPCODES[version]:
        return "—"
    return "handled" if opname in handled_on(version) else "graph break"


def markdown() -> str:
    names = sorted(set(OPCODES[(3, 11)]) | set(OPCODES[(3, 12)]))
    rows = ["| opcode | 3.11 | 3.12 |", "|---|---|---|"]
    rows += [f"| `{n}` | {status(n, (3, 11))} | {status(n, (3, 12))} |" for n in names]
    counts = {v: sum(status(n, v) == "handled" for n in OPCODES[v]) for v in OPCODES}
    rows.append("")
    rows.append(
        f"Handled: {counts[(3, 11)]} of {len(OPCODES[(3, 11)])} opcodes on 3.11, "
        f"{counts[(3, 12)]} of {len(OPCODES[(3, 12)])} on 3.12; every other one is a graph break "
        "naming the opcode (or, under fullgraph=True, an error)."
    )
    return "\n".join(rows)


HEADING = "## Opcodes"


def write_into(readme: str) -> None:
    """Replaces everything after the "## Opcodes" section's introduction with the table."""
    with open(readme) as f:
        text = f.read()
    start = text.index("| opcode | 3.11 | 3.12 |")
    with open(readme, "w") as f:
        f.write(text[:start] + markdown() + "\n")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write"]:
        write_into(sys.argv[2])
    else:
        print(markdown())
