"""Building and unpacking tuples, lists, dicts and strings."""

from __future__ import annotations

import inspect

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.translator.handlers.operators import apply_operator
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables import lazy_format
from ember_bytecode_tracer.variables.builtins import wrap_builtin
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, dict_key, mapping_items
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.objects import UserDefinedObjectVariable
from ember_bytecode_tracer.variables.sets import SetVariable, new_set
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable

INTRINSIC_LIST_TO_TUPLE = 6
INTRINSIC_UNARY_POSITIVE = 5
INTRINSIC_STOPITERATION_ERROR = 3  # 3.12 generators: StopIteration out of the body (PEP 479)


@handler("BUILD_TUPLE")
def build_tuple(tx, inst):
    tx.push(TupleVariable(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def build_list(tx, inst):
    tx.push(ListVariable(tx.popn(inst.arg)))


@handler("LIST_APPEND")
def list_append(tx, inst):
    value = tx.pop()
    target = tx.peek(inst.arg)
    target.call_method(tx, "append", [value], {})


@handler("LIST_EXTEND")
def list_extend(tx, inst):
    value = tx.pop()
    target = tx.peek(inst.arg)
    target.call_method(tx, "extend", [value], {})


@handler("LIST_TO_TUPLE", versions=((3, 11),))
def list_to_tuple(tx, inst):
    tx.push(TupleVariable(tx.pop().unpack(tx)))


@handler("CALL_INTRINSIC_1", versions=((3, 12),))
def call_intrinsic_1(tx, inst):
    if inst.arg == INTRINSIC_LIST_TO_TUPLE:
        tx.push(TupleVariable(tx.pop().unpack(tx)))
    elif inst.arg == INTRINSIC_UNARY_POSITIVE:
        import operator

        tx.push(apply_operator(tx, operator.pos, [tx.pop()]))
    elif inst.arg == INTRINSIC_STOPITERATION_ERROR:
        tx.push(_stop_iteration_error(tx.pop()))
    else:
        raise Unsupported(
            f"CALL_INTRINSIC_1 {inst.argrepr if hasattr(inst, 'argrepr') else inst.arg}"
        )


def _stop_iteration_error(exc):
    """What a 3.12 generator's own handler turns an escaping exception into: StopIteration
    becomes RuntimeError, as 3.11's generator object does (PEP 479); others pass as they are."""
    if not isinstance(exc, ExceptionVariable) or not issubclass(
        exc.raised.exc_type, StopIteration | StopAsyncIteration
    ):
        return exc
    kind = "generator" if issubclass(exc.raised.exc_type, StopIteration) else "async generator"
    message = f"{kind} raised {exc.raised.exc_type.__name__}"
    return ExceptionVariable(TracedException(RuntimeError, message), caught=exc.caught)


@handler("BUILD_MAP")
def build_map(tx, inst):
    flat = tx.popn(2 * inst.arg)
    items = {dict_key(flat[i], tx): flat[i + 1] for i in range(0, len(flat), 2)}
    tx.push(ConstDictVariable(items))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx, inst):
    keys = tx.pop().as_python_constant()
    values = tx.popn(inst.arg)
    tx.push(ConstDictVariable(dict(zip(keys, values, strict=True))))


@handler("MAP_ADD")
def map_add(tx, inst):
    value = tx.pop()
    key = tx.pop()
    tx.peek(inst.arg).call_method(tx, "__setitem__", [key, value], {})


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(tx, inst):
    other = tx.pop()
    target = tx.peek(inst.arg)
    items = mapping_items(tx, other)
    if items is None:
        raise Unsupported("** of a non-mapping")
    if inst.opname == "DICT_MERGE" and set(items) & set(target.items):
        raise Unsupported("duplicate keyword argument")
    target.items.update(items)


@handler("UNPACK_SEQUENCE")
def unpack_sequence(tx, inst):
    items = tx.pop().unpack(tx)
    if len(items) != inst.arg:
        raise Unsupported(f"unpacking {len(items)} values into {inst.arg}")
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def unpack_ex(tx, inst):
    items = tx.pop().unpack(tx)
    before, after = inst.arg & 0xFF, inst.arg >> 8
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack")
    middle = ListVariable(items[before : len(items) - after])
    result = [*items[:before], middle, *items[len(items) - after :]]
    for item in reversed(result):
        tx.push(item)


@handler("BUILD_STRING")
def build_string(tx, inst):
    tx.push(lazy_format.build_string(tx.popn(inst.arg)))


@handler("FORMAT_VALUE")
def format_value(tx, inst):
    flags = inst.arg
    spec = tx.pop().as_python_constant() if flags & 0x04 else ""
    value = tx.pop()
    if not isinstance(value, UserDefinedObjectVariable | TracedObjectVariable):
        tx.push(lazy_format.format_value(value, flags & 0x03, spec))  # lazy over a symbol
        return
    conversion = _CONVERSIONS.get(flags & 0x03)
    if conversion is not None:  # !s / !r: the builtin's rule runs __str__
        value = wrap_builtin(tx, conversion, conversion.__name__).call_function(tx, [value], {})
    if isinstance(value, UserDefinedObjectVariable | TracedObjectVariable):
        tx.push(_format_object(tx, value, spec))
        return
    tx.push(ConstantVariable(format(value.as_python_constant(), spec)))


_CONVERSIONS = {1: str, 2: repr, 3: ascii}


def _format_object(tx, value, spec: str):
    """format(obj, spec) of a user's object: its class's Python __format__, run; object's
    own (an empty spec: str(obj)) goes through str()'s rule (a Python __str__ runs)."""
    method = inspect.getattr_static(value.python_type(), "__format__", None)
    if inspect.isfunction(method):
        text = value.call_method(tx, "__format__", [ConstantVariable(spec)], {})
    elif method is object.__format__ and not spec:
        text = wrap_builtin(tx, str, "str").call_function(tx, [value], {})
    else:
        raise Unsupported(f"format() of {value} with spec {spec!r}")
    if not (text.is_python_constant() and type(text.as_python_constant()) is str):
        raise Unsupported(f"format() of {value} gave a value not known at trace time")
    return text


@handler("BUILD_SET")
def build_set(tx, inst):
    items = tx.popn(inst.arg)
    made = new_set()
    for item in items:  # added one by one, as CPython builds the literal
        made.call_method(tx, "add", [item], {})
    tx.push(made)


@handler("SET_ADD")
def set_add(tx, inst):
    value = tx.pop()
    _mutable_set(tx.peek(inst.arg)).call_method(tx, "add", [value], {})


@handler("SET_UPDATE")
def set_update(tx, inst):
    value = tx.pop()
    _mutable_set(tx.peek(inst.arg)).call_method(tx, "update", [value], {})


def _mutable_set(target) -> SetVariable:
    if not isinstance(target, SetVariable) or target.python_type() is not set:
        raise Unsupported("adding to a set that existed before the frame")
    return target
