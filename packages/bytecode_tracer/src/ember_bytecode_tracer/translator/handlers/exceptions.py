"""Handlers of `except` clauses, entered for exceptions raised at trace time."""

from __future__ import annotations

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable, is_builtin_exception


@handler("PUSH_EXC_INFO")
def push_exc_info(tx, inst):
    raised = tx.pop()
    tx.push(ConstantVariable(None))  # the exception handled before, restored by POP_EXCEPT
    tx.push(raised)
    tx.handling.append(raised)


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
    if tx.handling:
        tx.handling.pop()


@handler("RERAISE")
def reraise(tx, inst):
    raised = tx.pop()
    if inst.arg:
        tx.pop()  # the saved offset of the raising instruction
    if isinstance(raised, ExceptionVariable):
        raise raised.raised
    raise Unsupported("re-raising an exception the trace did not raise")


@handler("RAISE_VARARGS")
def raise_varargs(tx, inst):
    """`raise E(...)` / `raise E` / `raise E from C` of a builtin exception made in the trace:
    followed into a matching `except` clause; uncaught, a graph break after which Python
    raises it as eager code does. A bare `raise` re-raises the exception being handled
    (by this frame or, as CPython's exception state is per thread, by a caller's)."""
    if inst.arg == 0:
        raise _handled_exception(tx).raised
    if inst.arg == 2:
        tx.pop()  # the cause: only attached to the exception object, which no trace keeps
    raised = tx.pop()
    if isinstance(raised, ExceptionVariable):
        raise raised.raised
    exc_type = raised.as_python_constant() if raised.is_python_constant() else None
    if isinstance(exc_type, type) and is_builtin_exception(exc_type):
        raise TracedException(exc_type)
    raise Unsupported(f"raising {raised}")


def _handled_exception(tx) -> ExceptionVariable:
    frame = tx
    while frame is not None and not frame.handling:
        frame = frame.parent
    handled = frame.handling[-1] if frame is not None else None
    if not isinstance(handled, ExceptionVariable):
        raise Unsupported("bare raise outside an except block of the trace")
    return handled
