"""Generating the code objects that replace a traced frame.

The rewritten frame calls a *runner*: a Python closure that loads the graph's inputs
through their sources, calls the compiled graph, rebuilds the values the rest of the frame
needs, and replays side effects. Without a graph break the rewritten code returns what the
runner returns. At a graph break at instruction `inst` it pushes the rebuilt stack, stores
the rebuilt locals, runs `inst` itself as ordinary bytecode, and returns the result of
calling `resume_in_<function>_at_<line>`, a copy of the original code that restores the stack and
jumps to where `inst` left off; the frame hook traces that function when it runs.
"""

from __future__ import annotations

import dis
import itertools
import sys
import types
import weakref
from dataclasses import dataclass

from ember_bytecode_tracer.bytecode import (
    Instruction,
    assemble,
    create_call,
    create_instruction,
    decode,
    prefix_instructions,
)
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import FREE_CELL

PREFIX_OPS = {"RESUME", "COPY_FREE_VARS", "MAKE_CELL"}
OUT = "___ember_out"
STACK_ARG = "___ember_stack"


@dataclass(frozen=True)
class ResumePoint:
    """Where a resume function picks up: shown to users instead of its private locals."""

    function: str  # the user's function it continues
    name: str  # resume_in_<function>_at_<line>
    location: str  # file:line it resumes at

    def stack_label(self) -> str:
        return f"the values carried across the graph break into {self.location}"


# resume code objects made here (weak: a reset frees them)
RESUMES: weakref.WeakKeyDictionary[types.CodeType, ResumePoint] = weakref.WeakKeyDictionary()
_resume_ids = itertools.count()
PY311 = sys.version_info[:2] == (3, 11)


def _located(instructions: list[Instruction], lineno: int, positions=None) -> list[Instruction]:
    """Gives generated instructions a source position, so that tracebacks through the
    rewritten frame name a line of the user's function (the line being executed)."""
    fallback = positions or dis.Positions(lineno, lineno, None, None)
    for inst in instructions:
        if inst.positions is None or inst.positions.lineno is None:
            inst.positions = fallback
    return instructions


def _load_local(name: str, code: types.CodeType, keeps_cells: bool = True) -> Instruction:
    """Loads the runner's argument `name` in the rewritten `code` (which keeps the frame's
    cell variables as cells at a break, and turns them into plain locals otherwise)."""
    if name.startswith(FREE_CELL):  # the cell itself, for the runner to write or share
        return create_instruction("LOAD_CLOSURE", argval=name[len(FREE_CELL) :])
    cell = name in code.co_freevars or (keeps_cells and name in code.co_cellvars)
    return create_instruction("LOAD_DEREF" if cell else "LOAD_FAST", argval=name)


def _store_local(name: str, code: types.CodeType) -> Instruction:
    return create_instruction(
        "STORE_DEREF" if name in code.co_cellvars else "STORE_FAST", argval=name
    )


def _closure_names(code: types.CodeType) -> tuple[str, ...]:
    """The cells a resume function of `code` closes over: the frame's own cells (kept by
    the rewritten frame, shared with the functions made before the break), then its free
    variables' cells."""
    return code.co_cellvars + code.co_freevars


def _call_global(global_name: str, args: list[Instruction], nargs: int) -> list[Instruction]:
    return [
        create_instruction("LOAD_GLOBAL", argval=global_name, push_null=True),
        *args,
        *create_call(nargs),
    ]


def _item(index: int) -> list[Instruction]:
    return [
        create_instruction("LOAD_FAST", argval=OUT),
        create_instruction("LOAD_CONST", argval=index),
        create_instruction("BINARY_SUBSCR"),
    ]


@dataclass
class StackSlot:
    is_null: bool


def whole_frame_code(
    code: types.CodeType, runner_name: str, input_names: list[str]
) -> types.CodeType:
    """`return runner(*inputs)`: the frame ran to its return inside the trace."""
    loads = [_load_local(n, code, keeps_cells=False) for n in input_names]
    body = _call_global(runner_name, loads, len(input_names))
    body.append(create_instruction("RETURN_VALUE"))
    instructions = prefix_instructions((), code.co_freevars) + _located(body, code.co_firstlineno)
    return assemble(instructions, template=code, co_cellvars=())


def break_code(
    code: types.CodeType,
    runner_name: str,
    input_names: list[str],
    inst: Instruction,
    kw_names: tuple[str, ...] | None,
    stack_before: list[StackSlot],
    live_locals: list[str],
    resumes: dict[str, types.CodeType],
    f_globals: dict,
) -> types.CodeType:
    """Rebuild state, run `inst` eagerly, continue in resume function(s)."""
    body = _call_global(runner_name, [_load_local(n, code) for n in input_names], len(input_names))
    body.append(create_instruction("STORE_FAST", argval=OUT))
    index = 0
    for slot in stack_before:
        if slot.is_null:
            body.append(create_instruction("PUSH_NULL"))
        else:
            body += _item(index)
            index += 1
    for name in live_locals:
        body += _item(index)
        body.append(_store_local(name, code))
        index += 1

    try:
        successors = _successors(inst, stack_before)
    except Unsupported:  # an instruction no resume function follows (_stack_effect's table)
        return _rest_as_is(code, body, inst)
    if inst.exn_tab_entry is not None:
        return _break_in_block(code, body, inst, successors, live_locals, resumes, f_globals)
    if len(successors) == 1:
        body += _replay(inst, kw_names)
        ((resume_index, stack_after),) = successors
        body += _call_resume(code, resume_index, stack_after, live_locals, resumes, f_globals, inst)
    else:
        # A branch: each way it goes continues in its own resume function.
        (taken_index, taken_stack), (next_index, next_stack) = successors
        taken_block = _call_resume(
            code, taken_index, taken_stack, live_locals, resumes, f_globals, inst
        )
        branch = create_instruction(
            _neutral(inst.opname), target=taken_block[0], positions=inst.positions
        )
        body.append(branch)
        body += _call_resume(code, next_index, next_stack, live_locals, resumes, f_globals, inst)
        body += taken_block
    instructions = prefix_instructions(code.co_cellvars, code.co_freevars) + _located(
        body, code.co_firstlineno, inst.positions
    )
    return assemble(instructions, template=code)


def _break_in_block(code, body, inst, successors, live_locals, resumes, f_globals):
    """A break inside a try or with block: after restoring the state, jump to `inst` in a
    copy of the original code, so that it runs under the original exception table (an
    exception reaches the except clause, or the with-block's __exit__, as in eager code).
    If it completes, the resume function is called from outside the protected range, and
    its own copy of the table protects the rest of the block."""
    if len(successors) != 1:
        raise Unsupported("a branch on a tensor inside a try/with block")
    ((resume_index, stack_after),) = successors
    copy = _body_copy(decode(code))
    index = next(i for i, other in enumerate(copy) if other.offset == inst.offset)
    start = index
    while start > 0 and copy[start - 1].opname in ("KW_NAMES", "PRECALL"):
        start -= 1  # the call's prefix sets up what CALL reads; no stack effect
    resume = _call_resume(code, resume_index, stack_after, live_locals, resumes, f_globals, inst)
    body.append(create_instruction("JUMP", target=copy[start]))
    _located(resume, code.co_firstlineno, inst.positions)
    instructions = (
        prefix_instructions(code.co_cellvars, code.co_freevars)
        + _located(body, code.co_firstlineno, inst.positions)
        + copy[: index + 1]
        + resume
        + copy[index + 1 :]
    )
    return assemble(instructions, template=code)


def _rest_as_is(code: types.CodeType, body: list[Instruction], inst: Instruction):
    """A break at an instruction whose effect a resume function cannot take over (the
    BEFORE_WITH of a context manager the trace refused, a FOR_ITER, ...): after restoring
    the state, jump to `inst` in a copy of the original code, and the rest of the frame
    runs there as it is, under the original exception table; the graph before the break
    is kept (torch.compile does the same: its resume function there is skipped)."""
    copy = _body_copy(decode(code))
    start = next(i for i, other in enumerate(copy) if other.offset == inst.offset)
    body.append(create_instruction("JUMP", target=copy[start]))
    instructions = (
        prefix_instructions(code.co_cellvars, code.co_freevars)
        + _located(body, code.co_firstlineno, inst.positions)
        + copy
    )
    return assemble(instructions, template=code)


def _body_copy(original: list[Instruction]) -> list[Instruction]:
    """The code's instructions without its prefix (RESUME, COPY_FREE_VARS, MAKE_CELL)."""
    end = _prefix_end(original)
    return [
        i
        for i in original
        if not (i.opname in PREFIX_OPS and i.offset is not None and i.offset <= end)
    ]


def _neutral(opname: str) -> str:
    return opname.replace("FORWARD_", "").replace("BACKWARD_", "")


# Instructions a graph break may stop at, with (values popped, values pushed).
def _stack_effect(inst: Instruction) -> tuple[int, int]:
    op = inst.opname
    if op == "CALL":
        return inst.arg + 2, 1
    if op == "CALL_FUNCTION_EX":
        return 3 + (inst.arg & 1), 1
    simple = {
        "BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1),
        "CONTAINS_OP": (2, 1), "IS_OP": (2, 1), "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1),
        "UNARY_INVERT": (1, 1), "STORE_SUBSCR": (3, 0), "STORE_ATTR": (2, 0),
        "GET_ITER": (1, 1), "BINARY_SLICE": (3, 1),
    }  # fmt: skip
    if op in simple:
        return simple[op]
    if op == "LOAD_ATTR" and not (sys.version_info >= (3, 12) and inst.push_null):
        return 1, 1
    raise Unsupported(f"cannot break the graph at {op}")


def _successors(
    inst: Instruction, stack_before: list[StackSlot]
) -> list[tuple[Instruction, list[StackSlot]]]:
    op = inst.opname
    if "POP_JUMP" in op:
        after = stack_before[:-1]
        return [(inst.target, after), (_NEXT, after)]
    if op in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        return [(inst.target, list(stack_before)), (_NEXT, stack_before[:-1])]
    pops, pushes = _stack_effect(inst)
    after = stack_before[: len(stack_before) - pops] + [StackSlot(False)] * pushes
    return [(_NEXT, after)]


_NEXT = object()  # marker: the instruction after the break point


def _replay(inst: Instruction, kw_names: tuple[str, ...] | None) -> list[Instruction]:
    out = []
    if inst.opname == "CALL" and kw_names:
        out.append(create_instruction("KW_NAMES", argval=kw_names))
    if inst.opname == "CALL" and PY311:
        out.append(create_instruction("PRECALL", arg=inst.arg))
    out.append(
        create_instruction(
            inst.opname,
            arg=inst.arg if inst.argval is None or isinstance(inst.argval, int) else None,
            argval=inst.argval,
            push_null=inst.push_null,
            positions=inst.positions,
        )
    )
    return out


def _call_resume(
    code, target, stack_after, live_locals, resumes, f_globals, inst
) -> list[Instruction]:
    """Store the stack into temporaries, then `return resume(stack_tuple, *locals)`."""
    key = f"{'next' if target is _NEXT else 'target'}@{inst.offset}"
    resume_code = resume_function_code(code, inst, target is _NEXT, stack_after, live_locals)
    resumes[key] = resume_code
    out: list[Instruction] = []
    temps = [f"___ember_s{i}" for i in range(len(stack_after))]
    for temp in reversed(temps):
        out.append(create_instruction("STORE_FAST", argval=temp))
    closure = _closure_names(code)
    if closure:
        out.append(create_instruction("PUSH_NULL"))
        for name in closure:
            out.append(create_instruction("LOAD_CLOSURE", argval=name))
        out.append(create_instruction("BUILD_TUPLE", arg=len(closure)))
        out.append(create_instruction("LOAD_CONST", argval=resume_code))
        out.append(create_instruction("MAKE_FUNCTION", arg=0x08))
    else:
        # a private global per resume function; users see its code's name (resume_in_...)
        name = f"__ember_{resume_code.co_name}_{next(_resume_ids)}"
        f_globals[name] = types.FunctionType(resume_code, f_globals, resume_code.co_name)
        out.append(create_instruction("LOAD_GLOBAL", argval=name, push_null=True))
    values = [t for t, slot in zip(temps, stack_after, strict=True) if not slot.is_null]
    for name in resume_argument_names(code, live_locals):
        if name == STACK_ARG:
            for temp in values:
                out.append(create_instruction("LOAD_FAST", argval=temp))
            out.append(create_instruction("BUILD_TUPLE", arg=len(values)))
        else:
            out.append(create_instruction("LOAD_FAST", argval=name))
    out += create_call(len(resume_argument_names(code, live_locals)))
    out.append(create_instruction("RETURN_VALUE"))
    return out


def resume_function_code(
    code: types.CodeType,
    inst: Instruction,
    after_inst: bool,
    stack: list[StackSlot],
    live_locals: list[str],
) -> types.CodeType:
    """A copy of `code` that starts with `stack` and `live_locals` where `inst` left off."""
    original = decode(code)
    index = next(i for i, other in enumerate(original) if other.offset == inst.offset)
    target = original[index + 1] if after_inst else original[index].target
    if not after_inst and target is None:
        raise Unsupported("branch without a target")
    body = _body_copy(original)
    restore: list[Instruction] = []
    position = 0
    for slot in stack:
        if slot.is_null:
            restore.append(create_instruction("PUSH_NULL"))
        else:
            restore += [
                create_instruction("LOAD_FAST", argval=STACK_ARG),
                create_instruction("LOAD_CONST", argval=position),
                create_instruction("BINARY_SUBSCR"),
            ]
            position += 1
    restore.append(create_instruction("JUMP", target=target))
    _located(restore, code.co_firstlineno, target.positions)
    closure = _closure_names(code)
    instructions = prefix_instructions((), closure) + restore + body
    line = (target.positions.lineno if target.positions else None) or code.co_firstlineno
    function = RESUMES[code].function if code in RESUMES else code.co_name
    name = f"resume_in_{function}_at_{line}"
    arg_names = resume_argument_names(code, live_locals)
    others = tuple(n for n in code.co_varnames if n not in arg_names and n not in closure)
    flags = code.co_flags & ~(0x04 | 0x08)  # no *args / **kwargs
    resume = assemble(
        instructions,
        template=code,
        co_name=name,
        co_qualname=name,
        co_argcount=len(arg_names),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_varnames=arg_names + others,
        co_cellvars=(),
        co_freevars=closure,
        co_flags=flags,
    )
    RESUMES[resume] = ResumePoint(function, name, f"{code.co_filename}:{line}")
    return resume


def is_resume(code: types.CodeType) -> bool:
    return code in RESUMES


def resume_argument_names(code: types.CodeType, live_locals: list[str]) -> tuple[str, ...]:
    """The original's leading arguments keep their slots (zero-argument super() reads the
    first one), then the saved stack, then the other live locals; the frame's cells are
    not arguments (the resume function closes over them)."""
    live_locals = [n for n in live_locals if n not in code.co_cellvars]
    leading = []
    for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        if name not in live_locals:
            break
        leading.append(name)
    rest = [n for n in live_locals if n not in leading]
    return (*leading, STACK_ARG, *rest)


def _prefix_end(instructions: list[Instruction]) -> int:
    end = -1
    for inst in instructions:
        if inst.opname in PREFIX_OPS:
            end = inst.offset
        else:
            break
    return end
