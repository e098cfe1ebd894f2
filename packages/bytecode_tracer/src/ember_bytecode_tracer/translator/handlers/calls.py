"""Calls (3.11: PRECALL/CALL with KW_NAMES; 3.12: CALL), CALL_FUNCTION_EX, MAKE_FUNCTION."""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.translator.signals import GeneratorYield
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, mapping_items
from ember_bytecode_tracer.variables.functions import NestedUserFunctionVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.objects import NullVariable


@handler("KW_NAMES")
def kw_names(tx, inst):
    tx.kw_names = tuple(inst.argval)


@handler("CALL")
def call(tx, inst):
    args = tx.popn(inst.arg)
    first, second = tx.popn(2)
    if isinstance(first, NullVariable):
        fn = second
    else:
        fn, args = first, [second, *args]
    names = tx.kw_names or ()
    tx.kw_names = None
    if names:
        kwargs = dict(zip(names, args[-len(names) :], strict=True))
        args = args[: -len(names)]
    else:
        kwargs = {}
    tx.push(fn.call_function(tx, args, kwargs))


@handler("CALL_FUNCTION_EX")
def call_function_ex(tx, inst):
    kwargs = tx.pop() if inst.arg & 1 else ConstDictVariable({})
    args = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if not isinstance(null, NullVariable):
        raise Unsupported("CALL_FUNCTION_EX without NULL")
    items = mapping_items(tx, kwargs)
    if items is None:
        raise Unsupported("** of a non-mapping")
    if not all(type(k) is str for k in items):
        raise Unsupported("** with keys that are not strings (eager raises TypeError)")
    keywords = dict(items)
    tx.push(fn.call_function(tx, args.unpack(tx), keywords))


@handler("MAKE_FUNCTION")
def make_function(tx, inst):
    code = tx.pop().as_python_constant()
    flags = inst.arg
    closure = tx.pop().unpack(tx) if flags & 0x08 else []
    annotations = tx.pop().unpack(tx) if flags & 0x04 else []  # name, value, name, ...
    kwdefaults = tx.pop() if flags & 0x02 else ConstDictVariable({})
    defaults = tx.pop().unpack(tx) if flags & 0x01 else []
    tx.push(
        NestedUserFunctionVariable(
            code,
            code.co_qualname,
            tx.f_globals,
            defaults,
            {str(k): v for k, v in kwdefaults.items.items()},
            closure,
            {
                str(annotations[i].as_python_constant()): annotations[i + 1]
                for i in range(0, len(annotations), 2)
            },
        )
    )


@handler("RETURN_GENERATOR")
def return_generator(tx, inst):
    if tx.yielded is None and not tx.suspends_on_yield:
        raise Unsupported("generator function traced as a frame")
    tx.push(ConstantVariable(None))  # resumed with None; the next POP_TOP drops it


@handler("GET_YIELD_FROM_ITER")
def get_yield_from_iter(tx, inst):
    """`yield from it` in a generator run in the trace (to its end, or step by step): its
    items, each yielded in turn (SEND below)."""
    if (tx.yielded is None and not tx.suspends_on_yield) or tx.version >= (3, 12):
        raise Unsupported("yield from outside a generator run to its end (3.11)")
    value = tx.pop()
    tx.push(
        value if isinstance(value, ListIteratorVariable) else ListIteratorVariable(value.unpack(tx))
    )


@handler("SEND")
def send(tx, inst):
    """3.11's SEND: the next item of the iterator under the value sent (None, from the
    YIELD_VALUE before), or, when it is exhausted, None in its place and a jump past."""
    sent = tx.pop()
    iterator = tx.peek()
    if not isinstance(iterator, ListIteratorVariable) or not sent.is_python_constant():
        raise Unsupported("send() into a generator inside the trace")
    item = iterator.next(tx)
    if item is None:
        tx.pop()
        tx.push(ConstantVariable(None))  # what `yield from` over an iterator evaluates to
        tx.jump(inst.target)
        return
    tx.push(item)


@handler("YIELD_VALUE")
def yield_value(tx, inst):
    if tx.suspends_on_yield:
        raise GeneratorYield(tx.pop())  # TracedGenerator.send pushes the value sent back in
    if tx.yielded is None:
        raise Unsupported("yield outside a generator made during the trace")
    tx.yielded.append(tx.pop())
    tx.push(ConstantVariable(None))  # the value sent back in
