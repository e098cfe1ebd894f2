"""Sets and frozensets built during a trace (`{a, b}`, `set(...)`, `frozenset(...)`).

A `SetVariable` keeps a real set, its mirror, to which every operation of the traced code
is applied in the same order and with the same kind of operands as eager code applies it
(another set's own mirror, a constant frozenset itself, the items of any other iterable),
so that the mirror's table, and with it its iteration order, is the one CPython makes.
Constants are in the mirror as themselves. Tensors and objects that CPython hashes by
identity are in it as `_Identity` keys (the fake tensor, or the object) beside their
trackers; their order is by memory address. A set made of such objects passed in (each
read through a source), added one by one and then popped or iterated, follows the order
the real objects give this call, guarded (SET_ORDER: the same set built from the same
sources iterates the same way); any other such set is a graph break when iterated or
popped. Nothing outside the trace can see the set: the runner rebuilds it once per call
after the graph.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import Guard, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import aliased_container, guard, wrap_rule
from ember_bytecode_tracer.variables.builtins import RULES
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker
from ember_bytecode_tracer.variables.objects import UserDefinedObjectVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class _Identity:
    """A set key compared and hashed by the identity of `obj`, as object.__hash__ does."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


def _hashes_by_identity(cls: type) -> bool:
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


def set_key(tx: Translator, item: VariableTracker) -> Any:
    """What `item` is in a set's mirror."""
    if isinstance(item, TensorVariable):  # Tensor.__hash__ is id(); the fake is its identity
        return _Identity(item.example)
    if isinstance(item, TracedObjectVariable) and _hashes_by_identity(item.cls):
        return _Identity(item)
    if isinstance(item, UserDefinedObjectVariable) and _hashes_by_identity(type(item.value)):
        return _Identity(item.value)
    if item.is_python_constant():
        value = item.as_python_constant()
        try:
            hash(value)
        except TypeError:
            raise TracedException(TypeError, f"unhashable type: {type(value).__name__!r}") from None
        if type(value) in (set, list, dict):  # (hashable only through a subclass)
            raise Unsupported(f"a {type(value).__name__} as a set element")
        return value
    raise Unsupported(f"{item} as a set element (its hash is not known at trace time)")


class _Replay:
    """A set rebuilt by running `steps` again: ("new", fn, operands) makes it, ("call",
    name, operands) runs its method, ("inplace", fn, operands) an in-place operator."""

    __slots__ = ("steps",)

    def __init__(self, steps: tuple) -> None:
        self.steps = steps

    def build(self) -> Any:
        made: Any = None
        for kind, fn, operands in self.steps:
            reals = [o.build() if isinstance(o, _Replay) else o for o in operands]
            if kind == "new":
                made = fn(*reals)
            elif kind == "call":
                getattr(made, fn)(*reals)
            else:
                made = fn(made, *reals)
        return made


def _step(kind: str, fn: Any, operands: list) -> tuple | None:
    """A history step, or None when an operand cannot be replayed."""
    if any(o is None for o in operands):
        return None
    return (kind, fn, tuple(operands))


class SetVariable(VariableTracker):
    """A set or frozenset made in the trace: its mirror and the trackers of its objects."""

    def __init__(
        self,
        keys: set | frozenset,
        objects: dict[_Identity, VariableTracker],
        history: list | None,
        *,
        source: Source | None = None,
        seen: tuple | None = None,
    ) -> None:
        super().__init__(source=source)
        self.keys = keys
        self.objects = {k: objects[k] for k in keys if isinstance(k, _Identity)}
        # The mirror's operations, replayed after the graph to rebuild the very same table
        # (a copy of a set with deleted slots iterates in another order); None once
        # unknown (an operand without a history, a set passed in).
        self.history: list | None = history
        # A set passed in: its iteration order (guarded) until the trace changes it, and
        # the changes, run on it after the graph.
        self.seen = seen
        self.writes: list[tuple] = []
        # The iteration order of its objects, from their addresses this call (guarded)
        self.by_address: list[_Identity] | None = None

    @classmethod
    def made(cls, keys: Any, objects: dict, history: list | None) -> VariableTracker:
        """The tracker of a set or frozenset the mirror operations produced."""
        if type(keys) is frozenset and not any(isinstance(k, _Identity) for k in keys):
            return ConstantVariable(keys)  # a frozenset of constants is a constant
        return cls(keys, objects, history)

    def record(self, step: tuple | None) -> None:
        if self.source is not None:
            if step is None or not all(_replayable(o) for o in step[2]):
                raise Unsupported("a change to a set passed in that cannot be run again")
            self.writes.append(step)
            self.seen = None  # its order is now the real table's, which the trace lacks
            return
        if self.history is not None:
            self.history = None if step is None else [*self.history, step]
        self.by_address = None  # (a pop keeps what remains in order: _pop_by_address)

    def replay_operand(self) -> _Replay | None:
        return _Replay(tuple(self.history)) if self.history is not None else None

    def python_type(self) -> type:
        return type(self.keys)

    def truthiness(self, tx) -> bool:
        return bool(self.keys)

    def python_len(self, tx) -> VariableTracker:
        return ConstantVariable(len(self.keys))

    def element(self, key: Any) -> VariableTracker:
        return self.objects[key] if isinstance(key, _Identity) else ConstantVariable(key)

    def ordered(self) -> bool:
        """Whether the mirror's iteration order is CPython's (all elements constants, and
        every operation known from an empty set on)."""
        return not self.objects and self.history is not None

    def unpack(self, tx) -> list[VariableTracker]:
        if self.seen is not None:
            return [ConstantVariable(k) for k in self.seen]
        if not self.ordered():
            order = self.address_order(tx)
            if order is None:
                raise Unsupported("iterating over a set of tensors or objects (ordered by address)")
            return [self.objects[k] for k in order]
        return [ConstantVariable(k) for k in self.keys]

    def address_order(self, tx) -> list[_Identity] | None:
        """The iteration order of a set made in the trace by adding objects passed in (each
        read through a source, hashed by address) one by one, as this call's objects give
        it, guarded to be the same on a later call; None for any other set."""
        if self.by_address is not None:
            return self.by_address
        steps = self.history
        if self.source is not None or not steps or steps[0] != ("new", set, ()):
            return None
        if any(kind != "call" or fn != "add" for kind, fn, _ in steps[1:]):
            return None
        keys = [operands[0] for _, _, operands in steps[1:]]
        trackers = [self.objects.get(k) if isinstance(k, _Identity) else None for k in keys]
        reals = [_real_object(tx, t) for t in trackers]
        if not keys or any(r is None for r in reals):
            return None
        first = {}
        for index, real in enumerate(reals):
            first.setdefault(id(real), index)
        built = set(reals)  # the same adds, in the same order, on the real objects
        order = tuple(first[id(r)] for r in built)
        sources = tuple(t.source for t in trackers)
        where = tx.location()
        tx.output.add_guard(Guard(sources[0], GuardKind.SET_ORDER, (sources, order), where))
        self.by_address = [keys[i] for i in order]
        return self.by_address

    def var_getattr(self, tx, name):
        if not hasattr(self.keys, name):
            raise TracedException(AttributeError, name)
        return BoundMethodOfTracker(self, name)

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"{type(self.keys).__name__}.{name} with keyword arguments")
        handler = _METHODS.get(name)
        if handler is None or not hasattr(self.keys, name):
            raise Unsupported(f"{type(self.keys).__name__}.{name}")
        return handler(tx, self, name, args)

    def __repr__(self) -> str:
        return f"SetVariable({self.keys!r})"


def _operand(tx, value: VariableTracker, objects: dict) -> tuple[Any, Any]:
    """What eager code hands the set operation for `value` (a set's own table, the mirror;
    a constant set itself; else the items of the iterable in order), and how a replay
    hands it over again (None: it cannot)."""
    if isinstance(value, SetVariable):
        for k, v in value.objects.items():
            objects.setdefault(k, v)
        return value.keys, value.replay_operand()
    if isinstance(value, ConstantVariable) and type(value.value) is frozenset:
        return value.value, value.value
    keys = []
    for item in value.unpack(tx):
        key = set_key(tx, item)
        if isinstance(key, _Identity):
            objects.setdefault(key, item)
        keys.append(key)
    return keys, tuple(keys)


def _run(tx, target: SetVariable, fn: Any, reals: list, objects: dict, step) -> VariableTracker:
    """`fn(*reals)` on the mirrors; `step` is the history step that made a new set (or
    changed `target` in place)."""
    try:
        result = fn(*reals)
    except KeyError as exc:  # remove() of a missing element
        key = exc.args[0] if exc.args else None
        if isinstance(key, _Identity):
            raise Unsupported("set.remove() of a missing tensor or object") from None
        raise TracedException(KeyError, key) from None
    except TypeError as exc:
        raise TracedException(TypeError, str(exc)) from None
    if result is target.keys or result is None:  # in place (`s |= t`, s.update(t))
        target.objects = {k: objects[k] for k in target.keys if isinstance(k, _Identity)}
        target.record(step)
        if target.source is not None:
            tx.output.side_effects.containers[target.source] = target
        return target if result is not None else ConstantVariable(None)
    if isinstance(result, set | frozenset):
        return SetVariable.made(result, objects, [step] if step is not None else None)
    if isinstance(result, bool | int):
        return ConstantVariable(result)
    raise Unsupported(f"set operation returned a {type(result).__name__}")


def _elementwise(tx, target: SetVariable, name: str, args) -> VariableTracker:
    """add/discard/remove/__contains__: one element."""
    (item,) = args
    objects = dict(target.objects)
    key = set_key(tx, item)
    if isinstance(key, _Identity):
        objects.setdefault(key, item)
    if name == "__contains__":
        return ConstantVariable(key in target.keys)
    return _run(tx, target, getattr(target.keys, name), [key], objects, _step("call", name, [key]))


def _with_iterables(tx, target: SetVariable, name: str, args) -> VariableTracker:
    """update/union/issubset/...: other iterables, each handed over as eager does."""
    objects = dict(target.objects)
    pairs = [_operand(tx, a, objects) for a in args]
    reals, replays = [p[0] for p in pairs], [p[1] for p in pairs]
    if name.endswith("update"):
        step = _step("call", name, replays)
    else:  # a new set: the unbound method on a replay of this one
        step = _step("new", getattr(type(target.keys), name), [target.replay_operand(), *replays])
    return _run(tx, target, getattr(target.keys, name), reals, objects, step)


def _no_arguments(tx, target: SetVariable, name: str, args) -> VariableTracker:
    if args:
        raise Unsupported(f"set.{name} takes no arguments")
    if name == "pop":  # replayed too: the rebuilt set's cursor is where eager's is
        if not target.ordered():
            return _pop_by_address(tx, target)
        if not target.keys:
            raise TracedException(KeyError, "pop from an empty set")
        target.record(("call", "pop", ()))
        return ConstantVariable(target.keys.pop())
    if name == "__len__":
        return ConstantVariable(len(target.keys))
    if name == "copy":
        step = _step("new", type(target.keys).copy, [target.replay_operand()])
    else:
        step = ("call", name, ())
    return _run(tx, target, getattr(target.keys, name), [], dict(target.objects), step)


_METHODS = {
    **dict.fromkeys(("add", "discard", "remove", "__contains__"), _elementwise),
    **dict.fromkeys(
        ("update", "difference_update", "intersection_update", "symmetric_difference_update",
         "union", "intersection", "difference", "symmetric_difference", "issubset",
         "issuperset", "isdisjoint"),
        _with_iterables,
    ),
    **dict.fromkeys(("clear", "copy", "pop", "__len__"), _no_arguments),
}  # fmt: skip


def set_operator(tx: Translator, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """`a | b`, `s -= t`, `a <= b`, `a == b`... where a set of the trace is an operand: the
    operator run on the mirrors (a constant set or a number as it is)."""
    objects: dict = {}
    reals, replays = [], []
    for value in args:
        if isinstance(value, SetVariable):
            real, replay = _operand(tx, value, objects)
        elif value.is_python_constant():
            real = replay = value.as_python_constant()
        else:
            raise Unsupported(f"operator {fn.__name__} on a set and {value}")
        reals.append(real)
        replays.append(replay)
    target = args[0] if isinstance(args[0], SetVariable) else SetVariable(set(), {}, None)
    if (
        fn in _IN_PLACE_OPERATORS
        and isinstance(args[0], SetVariable)
        and target.python_type() is set
    ):
        step = _step("inplace", fn, replays[1:])
    else:
        step = _step("new", fn, replays)
    return _run(tx, target, fn, reals, objects, step)


_IN_PLACE_OPERATORS = frozenset((operator.ior, operator.iand, operator.isub, operator.ixor))
SET_OPERATORS = _IN_PLACE_OPERATORS | frozenset(
    (operator.or_, operator.and_, operator.sub, operator.xor, operator.eq, operator.ne,
     operator.lt, operator.le, operator.gt, operator.ge)
)  # fmt: skip


def _replayable(operand: Any) -> bool:
    """Constants (and tuples of them): what a write to a set passed in may hand over."""
    if isinstance(operand, tuple | frozenset):
        return all(_replayable(o) for o in operand)
    if isinstance(operand, _Replay):  # a set of the trace, made again from constants
        return all(_replayable(o) for step in operand.steps for o in step[2])
    return not isinstance(operand, _Identity)


def replay_onto(target: set, steps: tuple) -> None:
    """Runs a trace's changes to a set passed in on the set itself, in order."""
    for kind, fn, operands in steps:
        reals = [o.build() if isinstance(o, _Replay) else o for o in operands]
        if kind == "call":
            getattr(target, fn)(*reals)
        else:
            fn(target, *reals)


@wrap_rule("set", types=set, exact=True)
def _wrap_set(tx: Translator, value: set, source: Source | None) -> VariableTracker | None:
    if source is None or not all(is_constant_value(k) for k in value):
        return None  # a set of objects: by the object rule
    return aliased_container(tx, value, source, _build_set)


def _build_set(tx: Translator, value: set, source: Source) -> VariableTracker:
    guard(tx, source, GuardKind.DICT_KEYS, (set, tuple(value)))  # its elements, in order
    return SetVariable(set(value), {}, None, source=source, seen=tuple(value))


def _pop_by_address(tx, target: SetVariable) -> VariableTracker:
    """set.pop() of objects in address order: the first left (a fresh set's pops walk its
    table from the start, so with no add in between they follow its iteration order)."""
    order = target.address_order(tx)
    if order is None:
        raise Unsupported("set.pop() of a set of tensors or objects (ordered by address)")
    if not order:
        raise TracedException(KeyError, "pop from an empty set")
    key, rest = order[0], order[1:]
    popped = target.objects[key]
    target.keys.remove(key)
    target.record(("call", "pop", ()))
    target.by_address = rest
    return popped


def _real_object(tx, tracker: VariableTracker | None) -> Any:
    """The object this call passed in that `tracker` stands for (read through a source)."""
    if tracker is None or tracker.source is None:
        return None
    if isinstance(tracker, TensorVariable):
        return tx.output.real_value(tracker.source)
    if isinstance(tracker, UserDefinedObjectVariable):
        return tracker.value
    return None


def new_set(kind: type = set) -> SetVariable:
    """An empty set, as BUILD_SET starts one."""
    return SetVariable(kind(), {}, [("new", kind, ())])


def _make_builder(kind: type):
    def build(tx, args, kwargs):
        if kwargs or len(args) > 1:
            raise Unsupported(f"{kind.__name__}() takes at most one iterable")
        objects: dict = {}
        if not args:
            return SetVariable.made(kind(), objects, [("new", kind, ())])
        real, replay = _operand(tx, args[0], objects)
        step = _step("new", kind, [replay])
        return SetVariable.made(kind(real), objects, [step] if step is not None else None)

    return build


RULES[set] = _make_builder(set)
RULES[frozenset] = _make_builder(frozenset)
