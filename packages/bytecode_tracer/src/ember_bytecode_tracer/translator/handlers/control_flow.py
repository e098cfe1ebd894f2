"""Jumps and for-loops. A branch on a value unknown at trace time is a graph break."""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import DictViewVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable, LiveListIterator
from ember_bytecode_tracer.variables.lists import ListVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable
from ember_bytecode_tracer.variables.value_ranges import decided_truth


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def jump(tx, inst):
    tx.jump(inst.target)


def _condition(tx, value) -> bool:
    if isinstance(value, TensorVariable):
        known = decided_truth(value)  # a random draw against a constant outside its range
        if known is None:
            raise Unsupported(
                "branch on a tensor's value (data-dependent control flow)",
                kind="data_dependent_branch",
            )
        return known
    return value.truthiness(tx)


def _is_none(value) -> bool:
    if isinstance(value, ConstantVariable):
        return value.value is None
    if value.is_python_constant():
        return value.as_python_constant() is None
    return False


def _pop_jump(jump_when):
    def run(tx, inst):
        value = tx.pop()
        if jump_when(tx, value):
            tx.jump(inst.target)

    return run


POP_JUMPS = {
    "IF_TRUE": lambda tx, v: _condition(tx, v),
    "IF_FALSE": lambda tx, v: not _condition(tx, v),
    "IF_NONE": lambda tx, v: _is_none(v),
    "IF_NOT_NONE": lambda tx, v: not _is_none(v),
}
for _suffix, _when in POP_JUMPS.items():
    handler(f"POP_JUMP_{_suffix}", versions=((3, 12),))(_pop_jump(_when))
    handler(f"POP_JUMP_FORWARD_{_suffix}", f"POP_JUMP_BACKWARD_{_suffix}", versions=((3, 11),))(
        _pop_jump(_when)
    )


@handler("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", versions=((3, 11),))
def jump_or_pop(tx, inst):
    value = tx.peek()
    truth = _condition(tx, value)
    if truth == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
        tx.jump(inst.target)
    else:
        tx.pop()


@handler("GET_ITER")
def get_iter(tx, inst):
    value = tx.pop()
    if isinstance(value, ListIteratorVariable):
        tx.push(value)
    elif isinstance(value, DictViewVariable):
        tx.push(value.iterate())
    elif type(value) is ListVariable:
        tx.push(LiveListIterator(value.items))
    elif hasattr(value, "iterate_lazily"):  # a user's iterable object made in the trace
        tx.push(value.iterate_lazily(tx))
    else:
        tx.push(ListIteratorVariable(value.unpack(tx)))


@handler("FOR_ITER")
def for_iter(tx, inst):
    iterator = tx.peek()
    if not isinstance(iterator, ListIteratorVariable):
        raise Unsupported(f"for-loop over {iterator}")
    item = iterator.next(tx)
    if item is not None:
        tx.push(item)
        return
    tx.pop()
    tx.jump(inst.target)
    if tx.version >= (3, 12) and tx.instructions[tx.ip].opname == "END_FOR":
        tx.ip += 1  # 3.12 pops the iterator and skips END_FOR on exhaustion
