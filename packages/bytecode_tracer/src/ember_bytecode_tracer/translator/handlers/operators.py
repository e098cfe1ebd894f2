"""Arithmetic, comparisons, subscripts: constant-folded, or graph nodes for tensors."""

from __future__ import annotations

import dis
import inspect
import operator

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import Guard, GuardKind
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables import numpy_rules
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import (
    ConstructedObjectVariable,
    is_namedtuple_class,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, dict_key
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.lists import (
    BaseListVariable,
    SizeVariable,
    SliceVariable,
    TupleVariable,
    index_key,
)
from ember_bytecode_tracer.variables.nn_module import NNModuleVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, UserDefinedObjectVariable
from ember_bytecode_tracer.variables.sets import SET_OPERATORS, SetVariable, set_operator
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable, has_symbolic, sym_operator
from ember_bytecode_tracer.variables.tensor import TensorVariable, as_node_arg, wrap_graph_value
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable
from ember_bytecode_tracer.variables.typing_values import TypingVariable

BINARY_OPS = [name for name, _symbol in dis._nb_ops]  # index = BINARY_OP's oparg
NB_OPERATORS = {
    "ADD": operator.add, "SUBTRACT": operator.sub, "MULTIPLY": operator.mul,
    "TRUE_DIVIDE": operator.truediv, "FLOOR_DIVIDE": operator.floordiv,
    "REMAINDER": operator.mod, "POWER": operator.pow, "MATRIX_MULTIPLY": operator.matmul,
    "LSHIFT": operator.lshift, "RSHIFT": operator.rshift, "AND": operator.and_,
    "OR": operator.or_, "XOR": operator.xor,
}  # fmt: skip
# `x op= y`: operator's in-place twin of each (add -> iadd, and_ -> iand).
INPLACE_OPERATORS = {
    name: getattr(operator, "i" + fn.__name__.rstrip("_")) for name, fn in NB_OPERATORS.items()
}
COMPARISONS = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


INPLACE_TO_PLAIN = {v: NB_OPERATORS[k] for k, v in INPLACE_OPERATORS.items()}
# The special methods Python tries for `a op b`: a.__op__(b), then b.__rop__(a).
_REFLECTED = {"lt": "gt", "le": "ge", "eq": "eq", "ne": "ne", "gt": "lt", "ge": "le"}
DUNDERS = {
    fn: (f"__{fn.__name__.rstrip('_')}__", f"__r{fn.__name__.rstrip('_')}__")
    for fn in NB_OPERATORS.values()
} | {getattr(operator, name): (f"__{name}__", f"__{_REFLECTED[name]}__") for name in _REFLECTED}


def _python_special(value, name: str):
    """The class's Python function `name` when `value` is a user's object, else None."""
    if not isinstance(
        value, UserDefinedObjectVariable | TracedObjectVariable | ConstructedObjectVariable
    ):
        return None
    method = inspect.getattr_static(value.python_type(), name, None)
    return method if inspect.isfunction(method) else None


def _subclass_first(left, right, reflected: str) -> bool:
    try:
        lcls, rcls = left.python_type(), right.python_type()
    except Unsupported:
        return False
    own = inspect.getattr_static(rcls, reflected, None)
    return (
        lcls is not rcls and issubclass(rcls, lcls)
        and own is not inspect.getattr_static(lcls, reflected, None)
    )  # fmt: skip


def user_operator(tx, fn, args):
    """`a op b` where a user's class defines the operator in Python: its methods inlined in
    Python's order (a.__iop__ for `a op= b`, a.__op__, then b.__rop__ when that returned
    NotImplemented); None when neither side has one."""
    if len(args) != 2 or (fn not in DUNDERS and fn not in INPLACE_TO_PLAIN):
        return None
    left, right = args
    tries = []
    if fn in INPLACE_TO_PLAIN:
        tries.append((left, f"__i{fn.__name__.removeprefix('i').rstrip('_')}__", right))
        fn = INPLACE_TO_PLAIN[fn]
    forward, reflected = DUNDERS[fn]
    pair = [(left, forward, right), (right, reflected, left)]
    if _subclass_first(left, right, reflected):
        pair.reverse()  # a subclass's reflected method is tried first
    tries += pair
    found = [(obj, name, other) for obj, name, other in tries if _python_special(obj, name)]
    if not found and fn is operator.ne:
        # object.__ne__ asks __eq__ and inverts what it answers (not NotImplemented)
        equal = user_operator(tx, operator.eq, args)
        return None if equal is None else ConstantVariable(not equal.truthiness(tx))
    if not found:
        return None
    for obj, name, other in found:
        result = obj.call_method(tx, name, [other], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result
    asked = {id(obj) for obj, _name, _other in found}
    if fn in (operator.eq, operator.ne) and all(
        id(a) in asked or _foreign_not_implemented(a) for a in args
    ):  # no side knows the other: `==` falls back to `is`
        same = identity(tx, left, right)
        if same is not None:
            return ConstantVariable(same == (fn is operator.eq))
    raise Unsupported(f"operator {fn.__name__}: the operands' methods returned NotImplemented")


def _foreign_not_implemented(value) -> bool:
    """A constant whose C comparison answers NotImplemented for a user's object."""
    return isinstance(value, ConstantVariable) and type(value.value) in _PLAIN_SCALARS


_PLAIN_SCALARS = (int, float, bool, str, bytes, type(None))


def apply_operator(tx, fn, args):
    """Runs `fn` on trackers: a graph node when a tensor is involved, else at trace time."""
    if any(isinstance(a, NumpyArrayVariable) for a in args):  # NumPy semantics, in place too
        return numpy_rules.apply_array_operator(tx, fn, args)
    if fn in SET_OPERATORS and any(isinstance(a, SetVariable) for a in args):
        return set_operator(tx, fn, args)  # on the sets' mirrors, `s |= t` in place
    args = [_tuple_operand(tx, fn, a) for a in args]
    result = user_operator(tx, fn, args)
    if result is not None:
        return result
    if fn in INPLACE_TO_PLAIN and not isinstance(args[0], TensorVariable):
        fn = INPLACE_TO_PLAIN[fn]  # `n += t` for a non-tensor n rebinds n: not in place
    if any(isinstance(a, TensorVariable) for a in args):
        node_args = tuple(as_node_arg(tx, a) for a in args)
        return wrap_graph_value(tx, *tx.output.create_node("call_function", fn, node_args, {}))
    if any(has_symbolic(a) for a in args) and not (
        fn in (operator.add, operator.iadd, operator.mul)
        and any(isinstance(a, BaseListVariable) for a in args)
    ):
        return sym_operator(tx, fn, args)  # sizes and ints: a symbolic expression
    if all(isinstance(a, BaseListVariable) or a.is_python_constant() for a in args):
        if fn in (operator.add, operator.iadd, operator.mul) and any(
            isinstance(a, BaseListVariable) for a in args
        ):
            return _sequence_operator(tx, fn, args)
        try:
            return ConstantVariable(fn(*(a.as_python_constant() for a in args)))
        except Exception as exc:
            raise Unsupported(f"{fn.__name__} raised {type(exc).__name__} at trace time") from exc
    if fn in (operator.eq, operator.ne) and all(_default_equality(a) for a in args):
        same = identity(tx, *args)  # object.__eq__ on both sides: `==` is `is`
        if same is not None:
            return ConstantVariable(same == (fn is operator.eq))
    raise Unsupported(f"operator {fn.__name__} on {args}")


def _tuple_operand(tx, fn, value):
    """A namedtuple whose class keeps tuple's methods for this operator: the tuple of its
    items (tuple's own operator compares and concatenates them; `nt + (1,)` is a tuple)."""
    if not (isinstance(value, ConstructedObjectVariable) and is_namedtuple_class(value.cls)):
        return value
    plain = INPLACE_TO_PLAIN.get(fn, fn)
    if plain not in DUNDERS:
        return value
    if any(
        inspect.getattr_static(value.cls, name, None)
        is not inspect.getattr_static(tuple, name, None)
        for name in DUNDERS[plain]
    ):
        return value  # the class's own method decides: not a tuple here
    return TupleVariable(value.unpack(tx))


def _default_equality(value) -> bool:
    try:
        cls = value.python_type()
    except Unsupported:
        return False
    if cls is type(None):  # 3.12 gives NoneType its own (identity) comparison slots
        return True
    return cls.__eq__ is object.__eq__ and cls.__ne__ is object.__ne__


def _as_sequence(value):
    """A constant tuple (a tuple literal) as a TupleVariable, for sequence arithmetic."""
    if isinstance(value, ConstantVariable) and type(value.value) is tuple:
        return TupleVariable([ConstantVariable(v) for v in value.value])
    return value


def _sequence_operator(tx, fn, args):
    if any(getattr(a, "maxlen", None) is not None for a in args):
        raise Unsupported("sequence arithmetic on a deque with maxlen")
    left, right = (_as_sequence(a) for a in args)
    if fn is operator.mul:
        seq, count = (left, right) if isinstance(left, BaseListVariable) else (right, left)
        return type(seq)(seq.items * count.as_python_constant())
    tuple_like = (TupleVariable, SizeVariable)
    if isinstance(left, tuple_like) and isinstance(right, tuple_like):
        # torch.Size + tuple is a Size (and tuple + Size a tuple), as in Python.
        if isinstance(left, SizeVariable):
            return SizeVariable(left.items + right.items)
        return TupleVariable(left.items + right.items)
    if type(left) is not type(right):
        raise Unsupported("concatenating sequences of different types")
    if fn is operator.iadd and left.source is not None:
        left.call_method(tx, "extend", [right], {})
        return left
    return type(left)(left.items + right.items)


@handler("BINARY_OP")
def binary_op(tx, inst):
    right = tx.pop()
    left = tx.pop()
    name = BINARY_OPS[inst.arg].removeprefix("NB_")
    if name.startswith("INPLACE_"):
        fn = INPLACE_OPERATORS[name.removeprefix("INPLACE_")]
    else:
        fn = NB_OPERATORS[name]
    tx.push(apply_operator(tx, fn, [left, right]))


@handler("UNARY_NEGATIVE")
def unary_negative(tx, inst):
    tx.push(apply_operator(tx, operator.neg, [tx.pop()]))


@handler("UNARY_POSITIVE", versions=((3, 11),))  # 3.12: CALL_INTRINSIC_1 (containers.py)
def unary_positive(tx, inst):
    tx.push(apply_operator(tx, operator.pos, [tx.pop()]))


@handler("UNARY_INVERT")
def unary_invert(tx, inst):
    tx.push(apply_operator(tx, operator.invert, [tx.pop()]))


@handler("UNARY_NOT")
def unary_not(tx, inst):
    tx.push(ConstantVariable(not tx.pop().truthiness(tx)))


@handler("COMPARE_OP")
def compare_op(tx, inst):
    right = tx.pop()
    left = tx.pop()
    symbol = inst.argval if isinstance(inst.argval, str) else None
    if symbol is None or symbol not in COMPARISONS:
        raise Unsupported(f"comparison {inst.argval!r}")
    tx.push(apply_operator(tx, COMPARISONS[symbol], [left, right]))


@handler("IS_OP")
def is_op(tx, inst):
    right = tx.pop()
    left = tx.pop()
    same = identity(tx, left, right)
    if same is None:
        raise Unsupported("identity comparison of values not known at trace time")
    tx.push(ConstantVariable(same != bool(inst.arg)))


def _identity_rule(negated: bool):
    def run(tx, args, kwargs):
        same = identity(tx, *args)
        if same is None:
            raise Unsupported("identity comparison of values not known at trace time")
        return ConstantVariable(same != negated)

    return run


rule(operator.is_)(_identity_rule(False))
rule(operator.is_not)(_identity_rule(True))


def identity(tx, left, right) -> bool | None:
    """`left is right` when the trace knows it (None: it does not)."""
    if left.is_python_constant() and right.is_python_constant():
        return left.as_python_constant() is right.as_python_constant()
    if left is right:
        return True
    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        # Each tensor object has one fake example, which an in-place op or a no-op
        # `.to()`/`.contiguous()` returns itself, as eager returns the tensor; tensor inputs
        # are guarded distinct (convert_frame.py) or share one tracker.
        return left.example is right.example
    if isinstance(left, TensorVariable) != isinstance(right, TensorVariable):
        return False
    if isinstance(left, ConstantVariable) or isinstance(right, ConstantVariable):
        return False  # a constant is never the same object as a non-constant tracker
    if isinstance(left, TracedObjectVariable) or isinstance(right, TracedObjectVariable):
        return False  # an object built in the trace has one tracker, compared above
    if isinstance(left, NumpyArrayVariable) or isinstance(right, NumpyArrayVariable):
        return False  # likewise an array (np.asarray(a) returns a's own tracker)
    return _sourced_identity(tx, left, right)


def _real_object(value):
    """The real object a tracker read through a source stands for (None: not known)."""
    if isinstance(value, TypeVariable):
        return value.cls
    return getattr(value, "value", getattr(value, "module", None))


def _sourced_identity(tx, left, right) -> bool | None:
    """`a is b` for two objects read from the frame (a dataclass field's `_field_type is
    _FIELD` sentinel test): answered now, guarded as aliasing or distinct."""

    values = [_real_object(v) for v in (left, right)]
    if left.source is None or right.source is None or any(v is None for v in values):
        return None
    same = values[0] is values[1]
    if same:
        guard = Guard(
            left.source, GuardKind.TENSOR_ALIASING, right.source, user_location=tx.location()
        )
    else:
        guard = Guard(
            left.source, GuardKind.NO_TENSOR_ALIASING, (right.source,), user_location=tx.location()
        )
    tx.output.add_guard(guard)
    return same


@handler("CONTAINS_OP")
def contains_op(tx, inst):
    container = tx.pop()
    item = tx.pop()
    if isinstance(container, ConstDictVariable):
        found = dict_key(item, tx) in container.items
    elif isinstance(container, BaseListVariable):
        found = _in_sequence(tx, item, container.items)
    elif isinstance(container, ListIteratorVariable):
        # CPython's iterator `in`: advances it up to and past the first match
        found = False
        while not found and (element := container.next(tx)) is not None:
            found = same_or_equal(tx, item, element)
    elif container.is_python_constant():
        found = item.as_python_constant() in container.as_python_constant()
    elif (found := _in_frozenset_passed_in(tx, item, container)) is not None:
        pass
    else:
        # A user's container (a Mapping subclass, a registry): its own __contains__, inlined.
        found = container.call_method(tx, "__contains__", [item], {}).truthiness(tx)
    tx.push(ConstantVariable(found != bool(inst.arg)))


def _c_equality(value) -> bool:
    return not inspect.isfunction(inspect.getattr_static(type(value), "__eq__", None))


def _in_frozenset_passed_in(tx, item, container) -> bool | None:
    """`item in fs` for a frozenset read through a source whose elements are objects (a
    registry of classes or functions): immutable, so guarded by identity, and asked now
    when the item is known and no Python __eq__ can run; None: not such a case."""
    real = getattr(container, "value", None)
    if type(real) is not frozenset or container.source is None or not item.is_python_constant():
        return None
    probe = item.as_python_constant()
    if not (_c_equality(probe) and all(_c_equality(e) for e in real)):
        return None
    tx.output.add_guard(
        Guard(container.source, GuardKind.ID_MATCH, real, user_location=tx.location())
    )
    return probe in real


def _in_sequence(tx, item, elements) -> bool:
    """CPython's `item in seq`: each element in order, the same object or equal; a pair the
    trace cannot compare (a tensor against a number: its value decides) is a break."""
    return any(same_or_equal(tx, item, element) for element in elements)


def same_or_equal(tx, item, element) -> bool:
    """One step of `item in container`: the same object, or equal (a user's __eq__ is not
    run here: a pair whose equality the trace cannot decide is a break)."""
    same = identity(tx, element, item)
    if same:
        return True
    if element.is_python_constant() and item.is_python_constant():
        return bool(element.as_python_constant() == item.as_python_constant())
    if same is not None and _default_equality(element) and _default_equality(item):
        return False  # object.__eq__ on both sides: `==` is `is`
    raise Unsupported(f"`in` compares {item} with {element}: not known at trace time")


def subscript(tx, container, key):
    if isinstance(container, NumpyArrayVariable):
        return numpy_rules.getitem(tx, container, key)
    if isinstance(container, TensorVariable) and isinstance(key, SymNodeVariable):
        # x[n] with a symbolic n: Tensor.__getitem__ would specialize n (__index__)
        args = (container.node, 0, as_node_arg(tx, key))
        return wrap_graph_value(tx, *tx.output.create_node("call_function", torch.select, args, {}))
    if isinstance(container, TensorVariable):
        return apply_operator(tx, operator.getitem, [container, key])
    if isinstance(container, BaseListVariable | ConstDictVariable):
        return container.getitem(tx, key)
    if isinstance(container, NNModuleVariable):
        return container.getitem(tx, key)
    if isinstance(container, TypingVariable):  # List[int]: typing's pure constructor, now
        return container.getitem(tx, key)
    if isinstance(container, ConstantVariable):
        return ConstantVariable(container.value[index_key(key)])
    return container.call_method(tx, "__getitem__", [key], {})


@handler("BINARY_SUBSCR")
def binary_subscr(tx, inst):
    key = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, key))


@handler("BINARY_SLICE", versions=((3, 12),))
def binary_slice(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, SliceVariable(start, stop, ConstantVariable(None))))


@handler("BUILD_SLICE")
def build_slice(tx, inst):
    parts = tx.popn(inst.arg)
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    tx.push(SliceVariable(*parts))


def store_subscript(tx, container, key, value):
    if isinstance(container, NumpyArrayVariable):
        numpy_rules.setitem(tx, container, key, value)
        return
    if isinstance(container, TensorVariable):
        node_args = (container.node, as_node_arg(tx, key), as_node_arg(tx, value))
        tx.output.create_node("call_function", operator.setitem, node_args, {})
        return
    if isinstance(container, BaseListVariable | ConstDictVariable):
        container.call_method(tx, "__setitem__", [key, value], {})
        return
    store_item = getattr(container, "store_item", None)  # a tracker with its own item writes
    if store_item is not None:
        store_item(tx, key, value)
        return
    if _python_item_method(container, "__setitem__"):  # a user mapping: its Python method runs
        container.call_method(tx, "__setitem__", [key, value], {})
        return
    raise Unsupported(f"item assignment on {container}")


def _python_item_method(container, name: str) -> bool:
    """Whether `obj[k] = v` / `del obj[k]` on a user object dispatches to a Python method of
    its type (a MutableMapping written in Python): then the method is traced, its writes
    replayed like any other. A C slot (a dict subclass's) is not this path."""
    if not isinstance(container, UserDefinedObjectVariable | TracedObjectVariable):
        return False
    return inspect.isfunction(inspect.getattr_static(container.python_type(), name, None))


@handler("STORE_SUBSCR")
def store_subscr(tx, inst):
    key = tx.pop()
    container = tx.pop()
    value = tx.pop()
    store_subscript(tx, container, key, value)


@handler("STORE_SLICE", versions=((3, 12),))
def store_slice(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    value = tx.pop()
    store_subscript(tx, container, SliceVariable(start, stop, ConstantVariable(None)), value)


@handler("DELETE_SUBSCR")
def delete_subscr(tx, inst):
    key = tx.pop()
    container = tx.pop()
    listlike = isinstance(container, BaseListVariable | ConstDictVariable)
    if listlike or _python_item_method(container, "__delitem__"):
        container.call_method(tx, "__delitem__", [key], {})
    else:
        raise Unsupported(f"del on {container}")
