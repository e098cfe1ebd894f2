"""Python builtins, each call handled by a small rule keyed by the builtin."""

from __future__ import annotations

import builtins
import inspect
import math
import operator
import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, BuiltinSource, Guard, GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import CallableVariable, VariableTracker
from ember_bytecode_tracer.variables.builder import guard, real_value, wrap_rule
from ember_bytecode_tracer.variables.builtin_arity import check_builtin_arguments
from ember_bytecode_tracer.variables.constant import (
    ConstantVariable,
    is_constant_value,
    register_result_tracker,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, mapping_items, pair_items
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable, sequence_iterator_kind
from ember_bytecode_tracer.variables.lists import (
    ListVariable,
    SizeVariable,
    SliceVariable,
    TupleVariable,
    sorted_items,
)
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor
from ember_bytecode_tracer.variables.super_variable import SuperVariable, zero_argument_super
from ember_bytecode_tracer.variables.sym_builtins import TORCH_SYM_FUNCTIONS, call_symbolic
from ember_bytecode_tracer.variables.tensor import TensorVariable, wrap_graph_value
from ember_bytecode_tracer.variables.tensor_state import has_written_attribute

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator

Rule = Callable[["Translator", list[VariableTracker], dict[str, VariableTracker]], VariableTracker]
RULES: dict[Any, Rule] = {}

# Builtins that print, read input or touch the outside world: always a graph break.
IMPURE = {builtins.print, builtins.input, builtins.open, builtins.breakpoint,
          builtins.exec, builtins.eval, builtins.compile, builtins.globals, builtins.locals,
          builtins.vars, builtins.hash}  # fmt: skip
# Pure builtins that run at trace time when all their arguments are constants.
PURE_ON_CONSTANTS = {
    abs,
    all,
    any,
    bool,
    chr,
    divmod,
    float,
    format,
    int,
    len,
    max,
    min,
    ord,
    pow,
    repr,
    round,
    sorted,
    str,
    sum,
    tuple,
    list,
    set,
    frozenset,
    reversed,
    math.sqrt,
    math.ceil,
    math.floor,
    math.trunc,
    math.log,
    math.exp,
    math.pi.__class__,
    math.prod,
    math.isfinite,
    math.isnan,
    math.isinf,
    math.gcd,
    math.cos,
    math.sin,
    math.tan,
    math.log2,
    math.log10,
    math.erf,
    math.tanh,
    math.radians,
    math.degrees,
    math.asin,
    math.acos,
    math.atan,
    math.atan2,
    math.sinh,
    math.cosh,
    math.asinh,
    math.acosh,
    math.atanh,
    math.hypot,
    math.copysign,
    math.fabs,
    math.fmod,
    math.expm1,
    math.log1p,
    math.isclose,
    math.factorial,
    math.comb,
    math.perm,
    math.lcm,
    math.isqrt,
    math.dist,
    math.frexp,
    math.ldexp,
    math.modf,
    math.remainder,
    math.erfc,
    math.gamma,
    math.lgamma,
    operator.index,
    isinstance,
    issubclass,
    callable,
    os.fspath,
    complex,
}  # fmt: skip  (os.fspath: a str or bytes is its own path)


def rule(*fns: Any):
    def register(fn: Rule) -> Rule:
        for f in fns:
            RULES[f] = fn
        return fn

    return register


class BuiltinVariable(CallableVariable):
    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if fn in IMPURE:
            raise Unsupported(f"call to builtin {fn.__name__}() (it has effects outside the graph)")
        check_builtin_arguments(fn, len(args), tuple(kwargs))
        symbolic = call_symbolic(tx, fn, args, kwargs)  # sizes kept symbolic (sym_builtins.py)
        if symbolic is not None:
            return symbolic
        handler = RULES.get(fn)
        if handler is not None:
            return handler(tx, args, kwargs)
        if fn in PURE_ON_CONSTANTS:
            return constant_fold(fn, args, kwargs)
        raise Unsupported(f"call to builtin {getattr(fn, '__name__', fn)}()")


def constant_fold(
    fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
) -> VariableTracker:
    try:
        a = [x.as_python_constant() for x in args]
        k = {n: x.as_python_constant() for n, x in kwargs.items()}
    except Unsupported:
        raise Unsupported(
            f"{getattr(fn, '__name__', fn)}() on values unknown at trace time"
        ) from None
    try:
        result = fn(*a, **k)
    except Exception as exc:
        raise Unsupported(
            f"{getattr(fn, '__name__', fn)}() raised {type(exc).__name__} at trace time"
        ) from exc
    return wrap_python_result(result)


# CPython's iterators over a sequence (what `iter()`, `__iter__()` and `reversed()` of a
# str, bytes, range, tuple or list give): a fresh one from a value known at trace time
# yields known items, so it is traced as the list of them.
SEQUENCE_ITERATORS = frozenset(
    type(it) for it in (
        iter(""), iter("\u00e9"), iter(b""), iter(range(0)), iter(range(1 << 64)), iter(()),
        iter([]), reversed([]), reversed(()), reversed(range(0)), reversed(""),
    )
)  # fmt: skip


def wrap_python_result(result: Any) -> VariableTracker:
    if isinstance(result, list):
        return ListVariable([wrap_python_result(r) for r in result])
    if isinstance(result, tuple) and type(result) is tuple:
        return TupleVariable([wrap_python_result(r) for r in result])
    if isinstance(result, dict):
        return ConstDictVariable({k: wrap_python_result(v) for k, v in result.items()})
    if is_constant_value(result):
        return ConstantVariable(result)
    if type(result) is torch.Size:
        return SizeVariable(tuple(result))
    if type(result) in SEQUENCE_ITERATORS:
        kind = type(result) if type(result) in (type(iter(())), type(iter([]))) else None
        return ListIteratorVariable([wrap_python_result(r) for r in result], kind=kind)
    raise Unsupported(f"builtin returned a {type(result).__name__}")


register_result_tracker(wrap_python_result)


@rule(len)
def _len(tx, args, kwargs):
    (value,) = args
    if isinstance(value, TensorVariable):
        if value.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return ConstantVariable(value.example.shape[0])
    own = getattr(value, "python_len", None)  # objects with a Python __len__
    if own is not None:
        return own(tx)
    if isinstance(value, ConstDictVariable):
        return ConstantVariable(len(value.items))
    if isinstance(value, ConstantVariable):
        return ConstantVariable(len(value.value))
    return ConstantVariable(len(value.unpack(tx)))


def _own_instancecheck(cls: Any) -> Callable | None:
    """A metaclass's `__instancecheck__` written in Python that may answer otherwise than
    the class hierarchy does (abc's and torch's agree with it on the types traced)."""
    check = getattr(type(cls), "__instancecheck__", None)
    if inspect.isfunction(check) and not check.__module__.startswith(("torch", "abc")):
        return check
    return None


#: the metaclass of torch's legacy tensor types (torch.FloatTensor, torch.cuda.LongTensor...)
_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


@rule(isinstance)
def _isinstance(tx, args, kwargs):
    """By the value's type; a class whose metaclass has its own `__instancecheck__` asks it
    (inlined), as isinstance() does unless the type is the class itself. A tensor is an
    instance of a legacy tensor type (torch.FloatTensor) by its dtype and device, which its
    guard pins: the example value answers."""
    value, classes = args
    cls = classes.as_python_constant()
    kind = value.python_type()
    options = cls if type(cls) is tuple else (cls,)
    for i, option in enumerate(options):
        if isinstance(option, _LEGACY_TENSOR_TYPE) and isinstance(value, TensorVariable):
            if isinstance(value.example, option):
                return ConstantVariable(True)
            continue
        check = None if kind is option else _own_instancecheck(option)
        if check is None:
            if issubclass(kind, option):
                return ConstantVariable(True)
            continue
        tracker = classes.unpack(tx)[i] if type(cls) is tuple else classes
        if tx.inline_call(check, None, [tracker, value], {}).truthiness(tx):
            return ConstantVariable(True)
    return ConstantVariable(False)


@rule(callable)
def _callable(tx, args, kwargs):
    # Whether a value can be called depends only on its type: a __call__ in its class
    # hierarchy (looked up on the classes themselves, not through their metaclass).
    (value,) = args
    cls = value.python_type()
    return ConstantVariable(any("__call__" in vars(k) for k in cls.__mro__))


@rule(range)
def _range(tx, args, kwargs):
    return ConstantVariable(range(*(a.as_python_constant() for a in args)))


@rule(slice)
def _slice(tx, args, kwargs):
    parts = [*args] + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


@rule(enumerate)
def _enumerate(tx, args, kwargs):
    start = (
        args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    ).as_python_constant()
    items = args[0].unpack(tx)
    return ListIteratorVariable(
        [TupleVariable([ConstantVariable(start + i), v]) for i, v in enumerate(items)]
    )


@rule(zip)
def _zip(tx, args, kwargs):
    strict = kwargs.get("strict") is not None and kwargs["strict"].truthiness(tx)
    # Advanced together, item by item, as CPython does: an input may be lazy or infinite
    # (map, itertools.count), and zip stops at the first one exhausted.
    iterators = [a if isinstance(a, ListIteratorVariable) else ListIteratorVariable(a.unpack(tx))
                 for a in args]  # fmt: skip
    rows = []
    while iterators:
        row = []
        for it in iterators:
            item = it.next(tx)
            if item is None:
                if strict and (row or any(o.next(tx) is not None for o in iterators[1:])):
                    # eager raises ValueError when the loop reaches the end, not here
                    raise Unsupported("zip(strict=True) over iterables of different lengths")
                return ListIteratorVariable(rows)
            row.append(item)
        rows.append(TupleVariable(row))
    return ListIteratorVariable(rows)


@rule(iter)
def _iter(tx, args, kwargs):
    (value,) = args
    if isinstance(value, ListIteratorVariable):
        return value
    if hasattr(value, "iterate_lazily"):
        return value.iterate_lazily(tx)
    return ListIteratorVariable(value.unpack(tx), kind=sequence_iterator_kind(value))


@rule(id)
def _id(tx, args, kwargs):
    """id() of an object read from the frame: a constant, the object guarded by identity.
    An object made in the trace has no id yet: a break."""
    if len(args) != 1 or kwargs:
        raise Unsupported("id() takes one argument")
    (obj,) = args
    known, value = real_value(tx, obj) if obj.source is not None else (False, None)
    if not known:
        raise Unsupported(f"id() of {obj}, made in the trace")
    guard(tx, obj.source, GuardKind.ID_MATCH, value)
    return ConstantVariable(id(value))


@rule(next)
def _next(tx, args, kwargs):
    iterator = args[0]
    if hasattr(iterator, "next_item"):  # a user's iterator object: its __next__
        item = iterator.next_item(tx)
    elif not isinstance(iterator, ListIteratorVariable):
        raise Unsupported(f"next() on {iterator}")
    else:
        item = iterator.next(tx)
    if item is None:
        if len(args) > 1:
            return args[1]
        raise TracedException(StopIteration)  # caught in the trace, or a break before next()
    return item


def _make_sequence(kind):
    def build(tx, args, kwargs):
        items = args[0].unpack(tx) if args else []
        return ListVariable(items) if kind is list else TupleVariable(items)

    return build


RULES[list] = _make_sequence(list)
RULES[tuple] = _make_sequence(tuple)


@rule(dict)
def _dict(tx, args, kwargs):
    items: dict[Any, VariableTracker] = {}
    if args:
        mapped = mapping_items(tx, args[0])
        items.update(mapped if mapped is not None else pair_items(tx, args[0]))
    items.update(kwargs)
    return ConstDictVariable(items)


@rule(getattr)
def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if len(args) > 2:
        if not _traces_getattribute(obj) and has_attribute(tx, obj, name) is False:
            _guard_absent(tx, obj, name)
            return args[2]
        try:
            return obj.var_getattr(tx, name)
        except TracedException as exc:  # the trace established it is missing
            if exc.exc_type is AttributeError:
                return args[2]
            raise
        except Unsupported:
            if has_attribute(tx, obj, name) is False:
                _guard_absent(tx, obj, name)
                return args[2]
            raise
    return obj.var_getattr(tx, name)


def _guard_absent(tx, obj: VariableTracker, name: str) -> None:
    """The trace took the missing-attribute path: setting it later must retrace."""
    if obj.source is not None and not isinstance(obj, ConstantVariable):
        source = AttrSource(obj.source, name)
        tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=tx.location()))


def _guard_present(tx, obj: VariableTracker, name: str) -> None:
    """Reading the attribute records the guards its value needs, which fail once it is gone."""
    if isinstance(obj, TensorVariable):
        _guard_tensor_entry(tx, obj, name)
    elif obj.source is not None and not isinstance(obj, ConstantVariable):
        obj.var_getattr(tx, name)


def _real_tensor(tx, obj: TensorVariable) -> torch.Tensor | None:
    return tx.output.real_value(obj.source) if obj.source is not None else None


def _guard_tensor_entry(tx, obj: TensorVariable, name: str) -> None:
    """A tensor's own attribute (`t.name = ...`, in its __dict__) must still be there; its
    class's attributes stand with the tensor's type guard."""
    real = _real_tensor(tx, obj)
    if real is not None and name in real.__dict__:
        entry = ItemSource(AttrSource(obj.source, "__dict__"), name)
        guard(tx, entry, GuardKind.TYPE_MATCH, type(real.__dict__[name]))


def _traces_getattribute(obj: VariableTracker) -> bool:
    """An object whose class's Python __getattribute__ the trace runs (transformers'
    configs): asking it for the attribute guards what the hook and object.__getattribute__
    read, where `hasattr(obj, name)` as a guard would run the hook on every guard call."""
    traces = getattr(obj, "traces_getattribute", None)
    return traces is not None and traces()


def _answer_by_getattr(tx, obj: VariableTracker, name: str) -> bool | None:
    """hasattr through the traced hook: True or False with its guards recorded, None when
    the trace cannot tell (the caller guards hasattr itself) and the hook recorded no
    graph op or side effect before it stopped (else the break stands)."""
    before = tx.output.effects_snapshot()
    try:
        obj.var_getattr(tx, name)
    except TracedException as exc:
        if exc.exc_type is AttributeError:
            return False
        raise
    except Unsupported:
        if tx.output.effects_snapshot() != before:
            raise
        return None
    return True


@rule(hasattr)
def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if _traces_getattribute(obj):
        traced = _answer_by_getattr(tx, obj, name)
        if traced is not None:
            return ConstantVariable(traced)
    answer = has_attribute(tx, obj, name)
    if answer is None and hasattr(obj, "generic_getattr") and obj.source is None:
        # An object made in the trace whose Python __getattribute__ decides: run it.
        try:
            obj.var_getattr(tx, name)
            answer = True
        except TracedException as exc:
            if exc.exc_type is not AttributeError:
                raise
            answer = False
    if answer is None:
        raise Unsupported(f"hasattr({obj}, {name!r}) is not known at trace time")
    (_guard_present if answer else _guard_absent)(tx, obj, name)
    return ConstantVariable(answer)


@rule(super)
def _super(tx, args, kwargs):

    if not args:
        return zero_argument_super(tx)
    if len(args) == 2:
        return SuperVariable(args[0].as_python_constant(), args[1])
    raise Unsupported("super() with one argument")


def has_attribute(tx, obj: VariableTracker, name: str) -> bool | None:
    own = getattr(obj, "has_attribute", None)  # trackers that know their attributes
    if own is not None:
        return own(name)
    if isinstance(obj, ConstantVariable):
        return hasattr(obj.value, name)
    value = getattr(obj, "value", None)
    if value is None:
        value = getattr(obj, "module", None)
    if value is None:
        value = obj.cls if isinstance(obj, TypeVariable) else None
    if value is not None:
        return hasattr(value, name)
    if isinstance(obj, TensorVariable):
        if has_written_attribute(tx, obj, name):  # set earlier in the trace
            return True
        # The tensor the call passed (its __dict__), not the fake example: a fake tensor has
        # attributes of its own and none of the ones the program set on the real one.
        real = _real_tensor(tx, obj)
        return hasattr(real if real is not None else obj.python_type(), name)
    return None


@rule(type)
def _type(tx, args, kwargs):

    if len(args) != 1:
        raise Unsupported("type() with three arguments")
    # An object built in the trace knows where its class lives (its attributes are guarded).
    return TypeVariable(args[0].python_type(), source=getattr(args[0], "cls_source", None))


def _trace_time_key(tx, key: VariableTracker, item: VariableTracker, what: str) -> Any:
    result = key.call_function(tx, [item], {})
    if not result.is_python_constant():
        raise Unsupported(f"{what}(key=...) whose keys are not known at trace time")
    return result.as_python_constant()


def _make_extreme(fn):
    better = operator.gt if fn is max else operator.lt

    def run(tx, args, kwargs):
        values = list(args[0].unpack(tx)) if len(args) == 1 else list(args)
        key, default = kwargs.get("key"), kwargs.get("default")
        if key is not None and key.is_python_constant() and key.as_python_constant() is None:
            key = None
        if not values:
            if default is None:
                raise Unsupported(f"{fn.__name__}() of an empty sequence (Python raises)")
            return default
        if key is not None:
            keys = [_trace_time_key(tx, key, v, fn.__name__) for v in values]
            best = 0
            for i in range(1, len(keys)):  # the first of equal keys wins, as in CPython
                if better(keys[i], keys[best]):
                    best = i
            return values[best]
        if any(isinstance(v, TensorVariable) for v in values):
            return _extreme_of_tensors(tx, fn, better, values)
        return constant_fold(fn, [TupleVariable(values)], {})

    return run


_MAX_UNROLLED_EXTREME = 64


def _extreme_of_tensors(tx, fn, better, values: list[VariableTracker]) -> VariableTracker:
    # Python keeps the current best unless `candidate > best` (max) is true: for one-element
    # tensors of one shape, dtype and device, torch.where on that comparison picks the same
    # values (NaN included) without reading them into Python. Anything else (mixed with
    # numbers: the result's type depends on the values) is a graph break.
    if not all(isinstance(v, TensorVariable) for v in values):
        raise Unsupported(f"{fn.__name__}() over tensors and numbers compares tensor values")
    first = values[0].example
    for v in values:
        ex = v.example
        if (ex.shape, ex.dtype, ex.device) != (first.shape, first.dtype, first.device):
            raise Unsupported(f"{fn.__name__}() over tensors of different shapes or dtypes")
    if first.numel() != 1:
        raise Unsupported(f"{fn.__name__}() over tensors with more than one element")
    if len(values) > _MAX_UNROLLED_EXTREME:  # one comparison node per item: keep graphs small
        raise Unsupported(f"{fn.__name__}() over {len(values)} tensors")
    import torch

    best = values[0]
    for candidate in values[1:]:
        cond = tx.output.create_node("call_function", better, (candidate.node, best.node), {})
        best = wrap_graph_value(
            tx,
            *tx.output.create_node(
                "call_function", torch.where, (cond[0], candidate.node, best.node), {}
            ),
        )
    return best


RULES[min] = _make_extreme(min)
RULES[max] = _make_extreme(max)
for _fn in TORCH_SYM_FUNCTIONS:  # on constants they fold; on sizes, sym_builtins.py
    RULES[_fn] = lambda tx, args, kwargs, fn=_fn: constant_fold(fn, args, kwargs)


@rule(abs)
def _abs(tx, args, kwargs):
    (value,) = args
    if isinstance(value, TensorVariable):
        return wrap_graph_value(
            tx, *tx.output.create_node("call_function", operator.abs, (value.node,), {})
        )
    return constant_fold(abs, args, kwargs)


def _operator_rule(fn):
    def run(tx, args, kwargs):
        if kwargs:
            raise Unsupported(f"operator.{fn.__name__} with keyword arguments")
        if fn is operator.getitem:
            return tx.subscript(*args)
        return tx.apply_operator(fn, list(args))

    return run


for _fn in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
            operator.mod, operator.pow, operator.matmul, operator.lt, operator.le, operator.eq,
            operator.ne, operator.gt, operator.ge, operator.neg, operator.pos, operator.invert,
            operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
            operator.getitem, operator.iadd, operator.imul, operator.isub, operator.itruediv,
            operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul, operator.iand,
            operator.ior, operator.ixor, operator.ilshift, operator.irshift):  # fmt: skip
    RULES[_fn] = _operator_rule(_fn)


@rule(operator.truth)
def _truth(tx, args, kwargs):
    (value,) = args
    return ConstantVariable(value.truthiness(tx))


@rule(operator.not_)
def _not(tx, args, kwargs):
    (value,) = args
    return ConstantVariable(not value.truthiness(tx))


@rule(bool)
def _bool(tx, args, kwargs):
    # bool(x) asks x's tracker, as `if x:` does: a tensor breaks the graph, a deferred
    # argument check (validation_checks.py) registers its run-time check
    if kwargs:
        raise Unsupported("bool() takes no keyword arguments")
    return _truth(tx, args, kwargs) if args else ConstantVariable(False)


def _short_circuit(tx, args, kwargs, stop_when: bool) -> VariableTracker:
    # Like CPython: stop at the first item whose truth is `stop_when`. Each item's truth is
    # asked of its tracker, so a tensor item breaks the graph there while constants fold.
    if kwargs or len(args) != 1:
        raise Unsupported("all()/any() take exactly one iterable")
    (iterable,) = args
    if iterable.is_python_constant():
        return ConstantVariable((any if stop_when else all)(iterable.as_python_constant()))
    for item in iterable.unpack(tx):
        if item.truthiness(tx) is stop_when:
            return ConstantVariable(stop_when)
    return ConstantVariable(not stop_when)


@rule(all)
def _all(tx, args, kwargs):
    return _short_circuit(tx, args, kwargs, stop_when=False)


@rule(any)
def _any(tx, args, kwargs):
    return _short_circuit(tx, args, kwargs, stop_when=True)


@rule(sum)
def _sum(tx, args, kwargs):
    items = args[0].unpack(tx)
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in items:
        total = tx.apply_operator(operator.add, [total, item])
    return total


@rule(sorted)
def _sorted(tx, args, kwargs):

    unknown = set(kwargs) - {"key", "reverse"}
    if unknown or len(args) != 1:
        raise Unsupported("sorted() takes one iterable and key=/reverse=")
    items = args[0].unpack(tx)  # for a dict: its keys
    return ListVariable(sorted_items(tx, items, kwargs.get("key"), kwargs.get("reverse")))


@rule(reversed)
def _reversed(tx, args, kwargs):
    return ListIteratorVariable(list(reversed(args[0].unpack(tx))))


# ---- calling a class ------------------------------------------------------------------
@constructor("builtin_type")
def _construct_builtin_type(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if kind.cls in RULES or kind.cls in (int, float, bool, str, complex):
        return BuiltinVariable(kind.cls).call_function(tx, args, kwargs)
    return None


@constructor("torch_value_type")
def _construct_torch_value(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if kind.cls in (torch.finfo, torch.iinfo, torch.device, torch.Size):
        return constant_fold(kind.cls, args, kwargs)
    return None


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_function_with_rule(tx, value: Any, source) -> bool:
    return inspect.isfunction(value) and value in RULES


@wrap_rule("trace_time_rule_function", when=_is_function_with_rule)
def _wrap_function_with_rule(tx, value: Any, source) -> VariableTracker:
    # Library functions answered at trace time by a rule (inspect.signature).
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return BuiltinVariable(value)


def _has_trace_time_rule(tx, value: Any, source) -> bool:
    try:
        return value in RULES
    except TypeError:  # unhashable
        return False


@wrap_rule(
    "builtin_with_rule",
    types=(types.BuiltinFunctionType, types.WrapperDescriptorType),
    when=_has_trace_time_rule,
)
def _wrap_builtin_with_rule(tx, value: Any, source) -> VariableTracker:
    # C functions with a rule in the builtins table (functools.reduce, chain.from_iterable,
    # object.__setattr__).
    if source is not None:
        guard(tx, *_identity_of_builtin(value, source))
    return BuiltinVariable(value)


_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def _identity_of_builtin(value: Any, source) -> tuple:
    """What to ID-guard: a classmethod of a C class read from it (`dict.fromkeys`) is a new
    bound object on every read, the same as long as the class is (its attributes are fixed)."""
    owner = getattr(value, "__self__", None)
    if (
        isinstance(owner, type)
        and owner.__flags__ & _IMMUTABLE_TYPE
        and isinstance(source, AttrSource)
        and getattr(owner, source.attr, None) == value
    ):
        return source.base, GuardKind.ID_MATCH, owner
    return source, GuardKind.ID_MATCH, value


def _is_foldable_module_function(tx, value: Any, source) -> bool:
    if getattr(value, "__module__", None) in ("builtins", "math", "_operator", "operator"):
        return True
    try:
        return value in PURE_ON_CONSTANTS  # os.fspath
    except TypeError:  # unhashable
        return False


@wrap_rule("builtin_function", types=types.BuiltinFunctionType, when=_is_foldable_module_function)
def _wrap_builtin_function(tx, value: Any, source) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return BuiltinVariable(value)


def wrap_builtin(tx: Translator, value: Any, name: str) -> VariableTracker:
    """A name found in builtins (not shadowed by the globals at trace time)."""
    if isinstance(value, type):
        return TypeVariable(value)
    if isinstance(value, types.FunctionType):
        # a builtin patched with Python code (`builtins.isinstance = mine`): traced as the
        # function it is, guarded by identity (unpatched, the frame is traced again)
        return tx.wrap(value, BuiltinSource(name))
    if value is getattr(builtins, name, None):
        return BuiltinVariable(value)
    raise Unsupported(f"builtins.{name} has been replaced")
