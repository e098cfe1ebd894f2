"""Stack manipulation and no-ops."""

from __future__ import annotations

from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.translator.signals import ReturnValue
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.objects import NullVariable
from ember_bytecode_tracer.variables.user_contexts import user_context


@handler("NOP", "RESUME", "MAKE_CELL", "COPY_FREE_VARS", "EXTENDED_ARG", "CACHE")
@handler("PRECALL", versions=((3, 11),))
def no_op(tx, inst):
    # MAKE_CELL/COPY_FREE_VARS: cells and free variables are symbolic locals during a trace.
    pass


@handler("POP_TOP")
def pop_top(tx, inst):
    tx.pop()


@handler("PUSH_NULL")
def push_null(tx, inst):
    tx.push(NullVariable())


@handler("COPY")
def copy(tx, inst):
    tx.push(tx.peek(inst.arg))


@handler("SWAP")
def swap(tx, inst):
    n = inst.arg
    tx.stack[-1], tx.stack[-n] = tx.stack[-n], tx.stack[-1]


@handler("END_FOR", versions=((3, 12),))
def end_for(tx, inst):
    tx.popn(2)


@handler("RETURN_VALUE")
def return_value(tx, inst):
    raise ReturnValue(tx.pop())


@handler("RETURN_CONST", versions=((3, 12),))
def return_const(tx, inst):
    raise ReturnValue(ConstantVariable(inst.argval))


@handler("BEFORE_WITH")
def before_with(tx, inst):
    context = tx.pop()
    if not hasattr(context, "enter"):
        context = user_context(context)  # __enter__/__exit__ in Python, or a graph break
    tx.push(context.exit_handler())
    tx.push(context.enter(tx))
