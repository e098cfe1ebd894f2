"""Which graph value each program tensor holds, per storage, across mutations.

The traced program sees fake tensors; the graph sees values (FX nodes). A storage's current
contents is one value (`StorageState.value`, a fresh tensor whose node holds it); a tensor
viewing that storage is regenerated from it by replaying its chain of view ops whenever the
storage changed since the tensor's node was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload

from ember_aot_autograd.dense import is_dense


@dataclass(frozen=True)
class ViewStep:
    """One view op applied to the previous tensor of a chain: op(prev, *args, **kwargs)[index]."""

    op: OpOverload
    args: tuple
    kwargs: dict
    index: int | None  # which output, for ops returning several views (split, unbind)
    relative_offset: bool = False  # as_strided offset counted from the storage's base

    def apply(self, tensor: torch.Tensor) -> torch.Tensor:
        args = self.args
        if self.relative_offset:
            args = (*args[:2], args[2] + tensor.storage_offset())
        out = self.op(tensor, *args, **self.kwargs)
        return out if self.index is None else out[self.index]


@dataclass
class StorageState:
    """One storage of the traced program: the tensor laying it out, and its current contents."""

    base: torch.Tensor  # the tensor that defines the storage's layout in the graph
    value: torch.Tensor  # fresh tensor whose node holds the current contents of `base`
    input_index: int | None = None  # graph input that owns this storage, if any
    version: int = 0  # bumped on each write
    # graph inputs viewing this storage; the owner (`base`) is one that covers the others,
    # so that writing it back carries every write; `uncontained` when none does (writes
    # then refused: the functional value of `base` could not hold them)
    inputs: list[torch.Tensor] = field(default_factory=list)
    uncontained: bool = False

    @property
    def mutated(self) -> bool:
        return self.version > 0


@dataclass
class Entry:
    """A program tensor: its storage, how it views it, and its node as of `version`."""

    tensor: torch.Tensor  # held so that id(tensor) stays unique during the trace
    storage: StorageState
    node: torch.fx.Node
    chain: tuple[ViewStep, ...] = ()  # from storage.base; () for the base itself
    version: int = 0


def storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


@dataclass
class TensorTable:
    """id(tensor) -> Entry, plus storages by key (for tensors the program reached another way)."""

    entries: dict[int, Entry] = field(default_factory=dict)
    storages: dict[int, StorageState] = field(default_factory=dict)

    def get(self, tensor: torch.Tensor) -> Entry | None:
        entry = self.entries.get(id(tensor))
        return entry if entry is not None and entry.tensor is tensor else None

    def add_fresh(
        self, tensor: torch.Tensor, node: torch.fx.Node, input_index: int | None = None
    ) -> Entry:
        """A tensor owning new contents (an op's fresh output, an input, a constant)."""
        key = storage_key(tensor)
        known = self.storages.get(key)
        if known is not None and input_index is not None:
            return self._add_aliasing_input(tensor, node, known, input_index)
        state = StorageState(base=tensor, value=tensor, input_index=input_index)
        if input_index is not None:
            state.inputs.append(tensor)
        self.storages[key] = state
        entry = Entry(tensor, state, node)
        self.entries[id(tensor)] = entry
        return entry

    def _add_aliasing_input(
        self, tensor: torch.Tensor, node: torch.fx.Node, state: StorageState, input_index: int
    ) -> Entry:
        """An input viewing a storage another input owns: read as itself until the storage is
        written, then regenerated from the owner's value. An input covering the owner (x
        after x[:, 0]) becomes the owner, before anything was traced."""
        if state.version == 0 and covers(tensor, state.base) and not covers(state.base, tensor):
            for other in state.inputs:
                self.entries[id(other)].chain = (_as_strided_step(other, tensor),)
            state.base = state.value = tensor
            state.input_index = input_index
            entry = Entry(tensor, state, node)
        else:
            entry = Entry(tensor, state, node, chain=(_as_strided_step(tensor, state.base),))
            entry.version = state.version
        state.inputs.append(tensor)
        state.uncontained = not all(covers(state.base, t) for t in state.inputs)
        self.entries[id(tensor)] = entry
        return entry

    def add_view(self, tensor: torch.Tensor, source: Entry, step: ViewStep, node: Any) -> Entry:
        entry = Entry(
            tensor, source.storage, node, chain=(*source.chain, step), version=source.version
        )
        if entry.version != source.storage.version:  # the source itself was stale
            entry.version = -1
        self.entries[id(tensor)] = entry
        return entry

    def add_unknown_alias(self, tensor: torch.Tensor) -> Entry | None:
        """A tensor never seen whose storage is known (e.g. rebuilt by autograd): regenerated."""
        state = self.storages.get(storage_key(tensor))
        if state is None:
            return None
        entry = Entry(tensor, state, node=None, chain=(_as_strided_step(tensor, state.base),))
        entry.version = -1
        self.entries[id(tensor)] = entry
        return entry


def _span(tensor: torch.Tensor) -> tuple[int, int] | None:
    """The first and last storage element `tensor` reads; None for symbolic or empty."""
    values = [tensor.storage_offset(), *tensor.shape, *tensor.stride()]
    if not all(type(v) is int for v in values) or tensor.numel() == 0:
        return None
    first = tensor.storage_offset()
    return first, first + sum(
        (n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True)
    )


def covers(outer: torch.Tensor, inner: torch.Tensor) -> bool:
    """Whether every element of `inner` is an element of `outer` (same storage): `outer`
    dense, of the same dtype, its span around `inner`'s."""
    a, b = _span(outer), _span(inner)
    return (
        a is not None
        and b is not None
        and outer.dtype == inner.dtype
        and is_dense(outer)
        and a[0] <= b[0]
        and b[1] <= a[1]
    )


def _as_strided_step(tensor: torch.Tensor, base: torch.Tensor) -> ViewStep:
    offset = tensor.storage_offset() - base.storage_offset()
    return ViewStep(
        torch.ops.aten.as_strided.default,
        (tuple(tensor.shape), tuple(tensor.stride()), offset),
        {},
        None,
        relative_offset=True,
    )
