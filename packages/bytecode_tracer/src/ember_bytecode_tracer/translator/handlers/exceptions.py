"""Handlers of `except` clauses, entered for exceptions raised at trace time."""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable


@handler("PUSH_EXC_INFO")
def push_exc_info(tx, inst):
    raised = tx.pop()
    tx.push(ConstantVariable(None))  # the exception being handled before: none in a trace
    tx.push(raised)


@handler("CHECK_EXC_MATCH")
def check_exc_match(tx, inst):
    wanted = tx.pop().as_python_constant()
    raised = tx.peek()
    if not isinstance(raised, ExceptionVariable):
        raise Unsupported("except clause without an exception raised in the trace")
    tx.push(ConstantVariable(issubclass(raised.python_type(), wanted)))


@handler("POP_EXCEPT")
def pop_except(tx, inst):
    tx.pop()


@handler("RERAISE")
def reraise(tx, inst):
    raised = tx.pop()
    if inst.arg:
        tx.pop()  # the saved offset of the raising instruction
    if isinstance(raised, ExceptionVariable):
        raise raised.raised
    raise Unsupported("re-raising an exception the trace did not raise")
