"""Tuples, lists and torch.Size whose length is known at trace time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import VariableTracker, attribute_of_c_instance
from ember_bytecode_tracer.variables.builder import aliased_container, guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lazy import LazyEntries, entry

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


def index_key(index: VariableTracker) -> Any:
    """The key `index` stands for: its constant, or for a one-element integer tensor the
    trace built from constants (`torch.tensor(1)`, whose value the fake tensor carries and
    no input can change) that value, as its `__index__` gives."""
    constant = getattr(getattr(index, "example", None), "constant", None)
    if (
        isinstance(constant, torch.Tensor)
        and constant.numel() == 1
        and not (
            constant.is_floating_point() or constant.is_complex() or constant.dtype == torch.bool
        )
    ):
        return int(constant.item())
    return index.as_python_constant()


class BaseListVariable(LazyEntries, VariableTracker):
    container_type: type = tuple

    def __init__(self, items: list[VariableTracker], *, source: Source | None = None) -> None:
        super().__init__(source=source)
        self.items = list(items)

    def python_type(self) -> type:
        return self.container_type

    def as_python_constant(self) -> Any:
        return self.container_type([v.as_python_constant() for v in self.items])

    def truthiness(self, tx: Translator) -> bool:
        return bool(self._items)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx: Translator, index: VariableTracker) -> VariableTracker:
        key = index_key(index)
        if isinstance(key, slice):
            return (
                type(self)(self.items[key])
                if not isinstance(self, SizeVariable)
                else SizeVariable(self.items[key])
            )
        try:
            return self.entry_at(tx, key)
        except IndexError:
            raise TracedException(
                IndexError, f"{self.container_type.__name__} index out of range"
            ) from None
        except TypeError as exc:
            raise Unsupported(f"TypeError indexing {self.container_type.__name__}: {exc}") from exc

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self._items))
        if name == "index" and not kwargs:
            target = args[0].as_python_constant()
            return ConstantVariable([v.as_python_constant() for v in self.items].index(target))
        if name == "count" and not kwargs:
            target = args[0].as_python_constant()
            return ConstantVariable([v.as_python_constant() for v in self.items].count(target))
        if name == "__contains__":
            target = args[0].as_python_constant()
            return ConstantVariable(target in [v.as_python_constant() for v in self.items])
        raise Unsupported(f"{self.container_type.__name__}.{name}")

    def var_getattr(self, tx, name):
        return BoundMethodOfTracker(self, name)

    def has_attribute(self, name: str) -> bool | None:
        return attribute_of_c_instance(self.python_type(), name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


class TupleVariable(BaseListVariable):
    container_type = tuple


def is_struct_sequence(cls: type) -> bool:
    """torch.return_types.* (max, sort, histogramdd, ...): tuples whose items have names."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


class StructSequenceVariable(TupleVariable):
    """A struct sequence such as `torch.max(x, 0)`'s result: items by index or by name, and
    rebuilt as the same type."""

    def __init__(self, cls: type, items: list[VariableTracker], **kwargs: Any) -> None:
        super().__init__(items, **kwargs)
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def as_python_constant(self) -> Any:
        return self.cls([v.as_python_constant() for v in self.items])

    def getitem(self, tx: Translator, index: VariableTracker) -> VariableTracker:
        if isinstance(index.as_python_constant(), slice):  # a slice is a plain tuple
            return TupleVariable(self.items).getitem(tx, index)
        return super().getitem(tx, index)

    def var_getattr(self, tx, name):
        fields = self.cls.__match_args__
        if name in fields:
            return self.items[fields.index(name)]
        return super().var_getattr(tx, name)


class SizeVariable(BaseListVariable):
    """torch.Size: a tuple of int constants, or of symbolic sizes (SymNodeVariables)."""

    container_type = torch.Size

    def __init__(self, sizes, *, source: Source | None = None) -> None:
        # ints, SymInts (kept symbolic, never int()-ed: that would specialize) or trackers
        super().__init__(
            [s if isinstance(s, VariableTracker) else ConstantVariable(s) for s in sizes],
            source=source,
        )

    def call_method(self, tx, name, args, kwargs):
        if name == "numel":
            total = 1
            for item in self.items:
                total = total * (
                    item.value if hasattr(item, "value") else item.as_python_constant()
                )
            return ConstantVariable(total)
        return super().call_method(tx, name, args, kwargs)


class ListVariable(BaseListVariable):
    """A list. Mutations of a list that existed before the frame are replayed afterwards."""

    container_type = list

    def call_method(self, tx, name, args, kwargs):
        if name == "copy" and not args and not kwargs:  # a new list of the same items: its
            # writes stay in the frame (no source), the original's items keep their guards
            return ListVariable(self.items)
        mutating = {"append", "extend", "insert", "pop", "clear", "__setitem__", "reverse",
                    "remove", "__delitem__", "sort"}  # fmt: skip
        if name not in mutating:
            return super().call_method(tx, name, args, kwargs)
        items = self.items
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            items.extend(args[0].unpack(tx))
        elif name == "insert":
            items.insert(args[0].as_python_constant(), args[1])
        elif name == "pop":
            index = args[0].as_python_constant() if args else -1
            result = items.pop(index)
            self._record(tx)
            return result
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "remove":
            target = args[0].as_python_constant()
            items.pop([v.as_python_constant() for v in items].index(target))
        elif name == "__setitem__":
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                items[key] = args[1].unpack(tx)
            else:
                items[key] = args[1]
        elif name == "__delitem__":
            del items[args[0].as_python_constant()]
        elif name == "sort" and not args:
            items[:] = sorted_items(tx, items, kwargs.get("key"), kwargs.get("reverse"))
        else:
            raise Unsupported(f"list.{name}")
        self._record(tx)
        return ConstantVariable(None)

    def _record(self, tx: Translator) -> None:
        if self.source is not None:
            tx.output.side_effects.containers[self.source] = self


def sorted_items(
    tx: Translator,
    items: list[VariableTracker],
    key: VariableTracker | None,
    reverse: VariableTracker | None,
) -> list[VariableTracker]:
    """`items` in the order sorted() gives: by their values, or by `key` of each, which must
    be known at trace time (the items themselves may be tensors)."""
    if key is not None and key.is_python_constant() and key.as_python_constant() is None:
        key = None
    if key is None:
        keys = [item.as_python_constant() for item in items]
    else:
        keys = []
        for item in items:
            result = key.call_function(tx, [item], {})
            if not result.is_python_constant():
                raise Unsupported("sort key not known at trace time")
            keys.append(result.as_python_constant())
    backwards = bool(reverse.as_python_constant()) if reverse is not None else False
    order = sorted(range(len(items)), key=keys.__getitem__, reverse=backwards)
    return [items[i] for i in order]


class BoundMethodOfTracker(VariableTracker):
    """`obj.name` for a container tracker, before it is called."""

    def __init__(self, owner: VariableTracker, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx, args, kwargs):
        return self.owner.call_method(tx, self.name, args, kwargs)


class SliceVariable(VariableTracker):
    def __init__(self, start: VariableTracker, stop: VariableTracker, step: VariableTracker):
        super().__init__()
        self.parts = (start, stop, step)

    def python_type(self) -> type:
        return slice

    def as_python_constant(self) -> Any:
        return slice(*(p.as_python_constant() for p in self.parts))


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("torch_size", types=torch.Size)
def _wrap_size(tx: Translator, value: torch.Size, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.EQUALS_MATCH, value)
    return SizeVariable(tuple(value), source=source)


@wrap_rule("list_or_tuple", types=(list, tuple), exact=True)
def _wrap_sequence(tx: Translator, value: list | tuple, source: Source | None) -> VariableTracker:
    return aliased_container(tx, value, source, _build_sequence)


def _build_sequence(tx: Translator, value: list | tuple, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.LEN_MATCH, (type(value), len(value)))
    items = [
        entry(tx, item, ItemSource(source, i)) if source is not None else tx.wrap(item, None)
        for i, item in enumerate(value)
    ]
    cls = ListVariable if type(value) is list else TupleVariable
    return cls(items, source=source)
