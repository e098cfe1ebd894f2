"""map/filter, functools.reduce/partial and itertools, traced over trackers.

Each is a rule in the builtins table (`builtins.RULES`), keyed by the callable itself.
Iterators whose items depend on calling user code (map, filter, accumulate, islice over
such an iterator) are lazy, as in CPython: an item's function runs when the item is
asked for, so side effects interleave with the consumer's as they would in eager code.
Infinite iterators (count, repeat without `times`) are lazy too, and unpacking one is a
graph break rather than a hang. Combinatoric ones (product, combinations, permutations,
zip_longest) read their finite inputs up front, as CPython does.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import BuiltinVariable, rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.functions import PartialVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable, sequence_iterator_kind
from ember_bytecode_tracer.variables.lists import TupleVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator

Producer = Callable[["Translator"], VariableTracker | None]


@dataclasses.dataclass
class RebuildCall:
    """`fn(*args, **kwargs)` after the graph, over the rebuilt values of trackers (or of
    other RebuildCalls): how a lazy iterator that leaves the trace is made again, in the
    state the trace left it in (recipe_rules.py)."""

    fn: Callable
    args: list[Any]
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


class LazyIteratorVariable(ListIteratorVariable):
    """An iterator whose next item is computed when asked for (None: exhausted). `rebuild`
    gives the call that makes it again, in its current state, once the trace is over (None:
    it cannot leave the trace); an exhausted one is rebuilt as an empty iterator."""

    def __init__(
        self,
        produce: Producer,
        *,
        infinite: bool = False,
        what: str = "",
        rebuild: Callable[[], RebuildCall] | None = None,
    ) -> None:
        super().__init__([])
        self._produce = produce
        self.infinite = infinite
        self.what = what
        self.exhausted = False
        self.rebuild = rebuild

    def next(self, tx: Translator | None = None) -> VariableTracker | None:
        if self.exhausted:
            return None
        if tx is None:
            raise Unsupported(f"{self.what} iterator advanced outside a trace step")
        item = self._produce(tx)
        if item is None:
            self.exhausted = True
        return item

    def unpack(self, tx) -> list[VariableTracker]:
        if self.infinite:
            raise Unsupported(f"reading all items of an infinite {self.what} iterator")
        items = []
        while (item := self.next(tx)) is not None:
            items.append(item)
        return items

    def __repr__(self) -> str:
        return f"LazyIteratorVariable({self.what})"


class GeneratorVariable(LazyIteratorVariable):
    """The generator object a call of a user's generator function makes in the trace: each
    item is what its code yields when run (inline, with the consumer as its caller) to its
    next yield, when the consumer asks, so its effects interleave with the consumer's as in
    eager. A yield inside try/with is refused: eager runs that handler when an unfinished
    generator is dropped, which the trace cannot see. Living past the trace (returned,
    across a break), or send/throw/close, are graph breaks."""

    def __init__(self, generator: Any, name: str) -> None:
        # a user's try or with (a handler starting PUSH_EXC_INFO); 3.12 wraps a generator's
        # whole body in a handler of its own (StopIteration -> RuntimeError), which is not one
        covered = [
            i for i in generator.tx.instructions
            if i.opname == "YIELD_VALUE" and i.exn_tab_entry is not None
            and i.exn_tab_entry.target.opname == "PUSH_EXC_INFO"
        ]  # fmt: skip
        if covered:
            raise Unsupported(f"generator {name} yields inside try/with (its cleanup on drop)")
        super().__init__(self._step, what=f"generator {name}")
        self.generator = generator

    def _step(self, tx: Translator) -> VariableTracker | None:
        try:
            yielded, value = self.generator.send(tx, ConstantVariable(None))
        except TracedException as raised:
            self.exhausted = True  # a generator that raised is finished
            if issubclass(raised.exc_type, StopIteration):  # PEP 479: a RuntimeError
                raise TracedException(RuntimeError, "generator raised StopIteration") from None
            raise
        return value if yielded else None

    def python_type(self) -> type:
        return types.GeneratorType


def as_iterator(tx, value: VariableTracker) -> ListIteratorVariable:
    """The iterator `iter(value)` would give, as a tracker."""
    if isinstance(value, ListIteratorVariable):
        return value
    return ListIteratorVariable(value.unpack(tx), kind=sequence_iterator_kind(value))


def _constant(value: VariableTracker | None, default=None):
    return default if value is None else value.as_python_constant()


def _call(tx, fn: VariableTracker, args: list[VariableTracker]) -> VariableTracker:
    return fn.call_function(tx, args, {})


def _op(fn) -> VariableTracker:
    return BuiltinVariable(fn)


# --- builtins ---------------------------------------------------------------------------


@rule(map)
def _map(tx, args, kwargs):
    if kwargs or len(args) < 2:
        raise Unsupported("map() takes a function and at least one iterable")
    fn, iterators = args[0], [as_iterator(tx, a) for a in args[1:]]

    def produce(tx):
        items = []
        for it in iterators:  # stops at the shortest, after advancing the ones before it
            item = it.next(tx)
            if item is None:
                return None
            items.append(item)
        return _call(tx, fn, items)

    return LazyIteratorVariable(
        produce, what="map", rebuild=lambda: RebuildCall(map, [fn, *iterators])
    )


@rule(filter)
def _filter(tx, args, kwargs):
    if kwargs or len(args) != 2:
        raise Unsupported("filter() takes a function (or None) and one iterable")
    fn, it = args[0], as_iterator(tx, args[1])
    keep_truthy = fn.is_python_constant() and fn.as_python_constant() is None

    def produce(tx):
        while (item := it.next(tx)) is not None:
            verdict = item if keep_truthy else _call(tx, fn, [item])
            if verdict.truthiness(tx):
                return item
        return None

    return LazyIteratorVariable(
        produce, what="filter", rebuild=lambda: RebuildCall(filter, [fn, it])
    )


# --- functools --------------------------------------------------------------------------


@rule(functools.reduce)
def _reduce(tx, args, kwargs):
    if kwargs or len(args) not in (2, 3):
        raise Unsupported("functools.reduce() with keyword arguments")
    fn, it = args[0], as_iterator(tx, args[1])
    total = args[2] if len(args) == 3 else it.next(tx)
    if total is None:
        raise Unsupported("functools.reduce() of an empty iterable with no initial value")
    while (item := it.next(tx)) is not None:
        total = _call(tx, fn, [total, item])
    return total


@rule(functools.partial)
def _partial(tx, args, kwargs):
    if not args:
        raise Unsupported("functools.partial() without a function")
    func, bound = args[0], list(args[1:])
    if isinstance(func, PartialVariable):  # partial(partial(f, a), b) flattens, as in CPython
        return PartialVariable(func.func, [*func.args, *bound], {**func.kwargs, **kwargs})
    return PartialVariable(func, bound, dict(kwargs))


# --- itertools ----------------------------------------------------------------------------


def _chain_of(iterables: list[VariableTracker] | ListIteratorVariable, what: str):
    state: dict = {"current": None}

    def produce(tx):
        while True:
            if state["current"] is None:
                nxt = (
                    iterables.next(tx)
                    if isinstance(iterables, ListIteratorVariable)
                    else (iterables.pop(0) if iterables else None)
                )
                if nxt is None:
                    return None
                state["current"] = as_iterator(tx, nxt)
            item = state["current"].next(tx)
            if item is not None:
                return item
            state["current"] = None

    return LazyIteratorVariable(produce, what=what)


@rule(itertools.chain)
def _chain(tx, args, kwargs):
    if kwargs:
        raise Unsupported("itertools.chain() takes no keyword arguments")
    return _chain_of(list(args), "chain")


@rule(itertools.chain.from_iterable)
def _chain_from_iterable(tx, args, kwargs):
    (iterables,) = args
    return _chain_of(as_iterator(tx, iterables), "chain.from_iterable")


def _tuples(rows) -> ListIteratorVariable:
    return ListIteratorVariable([TupleVariable(list(row)) for row in rows])


@rule(itertools.product)
def _product(tx, args, kwargs):
    repeat = _constant(kwargs.get("repeat"), 1)
    pools = [a.unpack(tx) for a in args]
    return _tuples(itertools.product(*pools, repeat=repeat))


def _combinatoric(fn):
    def run(tx, args, kwargs):
        pool = args[0].unpack(tx)
        r = _constant(args[1] if len(args) > 1 else kwargs.get("r"), None)
        if r is None and fn is not itertools.permutations:
            raise Unsupported(f"itertools.{fn.__name__}() needs r")
        return _tuples(fn(pool, r) if r is not None else fn(pool))

    return run


for _fn in (itertools.combinations, itertools.permutations,
            itertools.combinations_with_replacement):  # fmt: skip
    rule(_fn)(_combinatoric(_fn))


@rule(itertools.zip_longest)
def _zip_longest(tx, args, kwargs):
    fill = kwargs.get("fillvalue", ConstantVariable(None))
    columns = [a.unpack(tx) for a in args]
    marker = object()
    rows = itertools.zip_longest(*columns, fillvalue=marker)
    return _tuples([fill if v is marker else v for v in row] for row in rows)


@rule(itertools.islice)
def _islice(tx, args, kwargs):
    if kwargs or len(args) < 2:
        raise Unsupported("itertools.islice() takes an iterable and stop or start, stop[, step]")
    it = as_iterator(tx, args[0])
    bounds = [a.as_python_constant() for a in args[1:]]
    window = slice(*bounds) if len(bounds) > 1 else slice(bounds[0])
    start, stop, step = window.start or 0, window.stop, window.step or 1
    if start < 0 or (stop is not None and stop < 0) or step < 1:
        raise Unsupported("itertools.islice() with negative bounds (Python raises ValueError)")
    state = {"next_index": start, "seen": 0}

    def produce(tx):
        target = state["next_index"]
        if stop is not None and target >= stop:
            return None
        while state["seen"] < target:  # skip up to the wanted index
            if it.next(tx) is None:
                return None
            state["seen"] += 1
        item = it.next(tx)
        if item is None:
            return None
        state["seen"] += 1
        state["next_index"] = target + step
        return item

    return LazyIteratorVariable(produce, what="islice")


@rule(itertools.accumulate)
def _accumulate(tx, args, kwargs):
    it = as_iterator(tx, args[0])
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    if fn is None or (fn.is_python_constant() and fn.as_python_constant() is None):
        fn = _op(operator.add)
    initial = kwargs.get("initial")
    if (
        initial is not None
        and initial.is_python_constant()
        and initial.as_python_constant() is None
    ):
        initial = None
    state = {"total": None, "started": False}

    def rebuild() -> RebuildCall:
        if not state["started"]:
            keywords = {} if initial is None else {"initial": initial}
            return RebuildCall(itertools.accumulate, [it, fn], keywords)
        # the running total was yielded already: resume from it, without yielding it again
        resumed = RebuildCall(itertools.accumulate, [it, fn], {"initial": state["total"]})
        return RebuildCall(itertools.islice, [resumed, ConstantVariable(1), ConstantVariable(None)])

    def produce(tx):
        if not state["started"]:
            state["started"] = True
            state["total"] = initial if initial is not None else it.next(tx)
            return state["total"]
        if state["total"] is None:
            return None
        item = it.next(tx)
        if item is None:
            return None
        state["total"] = _call(tx, fn, [state["total"], item])
        return state["total"]

    return LazyIteratorVariable(produce, what="accumulate", rebuild=rebuild)


@rule(itertools.repeat)
def _repeat(tx, args, kwargs):
    value = args[0] if args else kwargs["object"]
    times = _constant(args[1] if len(args) > 1 else kwargs.get("times"), None)
    if times is not None:
        return ListIteratorVariable([value] * max(times, 0))
    return LazyIteratorVariable(
        lambda tx: value,
        infinite=True,
        what="repeat",
        rebuild=lambda: RebuildCall(itertools.repeat, [value]),
    )


@rule(itertools.count)
def _count(tx, args, kwargs):
    start = _constant(args[0] if args else kwargs.get("start"), 0)
    step = _constant(args[1] if len(args) > 1 else kwargs.get("step"), 1)
    state = {"next": start}

    def produce(tx):
        value = state["next"]
        state["next"] = value + step
        return ConstantVariable(value)

    def rebuild() -> RebuildCall:
        position = [ConstantVariable(state["next"]), ConstantVariable(step)]
        return RebuildCall(itertools.count, position)

    return LazyIteratorVariable(produce, infinite=True, what="count", rebuild=rebuild)


@rule(itertools.cycle)
def _cycle(tx, args, kwargs):
    """`itertools.cycle(iterable)`: the iterable's items as they come, each saved; once it is
    exhausted, the saved items again, round after round (nothing saved: exhausted, as eager).
    It leaves the trace only before its first item (made again over the iterable as the
    trace left it); one that is part way through a round is a graph break."""
    if kwargs or len(args) != 1:
        raise Unsupported("itertools.cycle() takes one iterable")
    it = as_iterator(tx, args[0])
    saved: list[VariableTracker] = []
    state = {"replaying": False, "index": 0}

    def produce(tx):
        if not state["replaying"]:
            item = it.next(tx)
            if item is not None:
                saved.append(item)
                return item
            state["replaying"] = True
        if not saved:
            return None
        item = saved[state["index"] % len(saved)]
        state["index"] += 1
        return item

    def rebuild() -> RebuildCall:
        if saved:
            raise Unsupported("an itertools.cycle part way through a round leaving the trace")
        return RebuildCall(itertools.cycle, [it])

    return LazyIteratorVariable(produce, infinite=True, what="cycle", rebuild=rebuild)


@rule(itertools.starmap)
def _starmap(tx, args, kwargs):
    fn, it = args[0], as_iterator(tx, args[1])

    def produce(tx):
        item = it.next(tx)
        return None if item is None else _call(tx, fn, item.unpack(tx))

    return LazyIteratorVariable(
        produce, what="starmap", rebuild=lambda: RebuildCall(itertools.starmap, [fn, it])
    )
