"""Common subexpressions of an ops handler, by (expression, dtype), in nested scopes: a value
made inside a block (a masked body, a loop) is not reused after the block. Shared by the C++
and Triton ops handlers, which differ only in their op table and in how a new value is
written (`declare`). An op neither table has may be declared as a decomposition over the
ops it does have (`DECOMPOSITIONS`, read by the target's capability record too)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import torch

Value = TypeVar("Value")


class ScopedValues(Generic[Value]):
    out: Any  # the code writer new values go to (set by the handler)
    kernel: Any  # the kernel builder (`new_tmp()`)
    #: op name -> emitter of the op's expression text, and the ops whose result is a bool
    OPS: dict[str, Callable[..., str]]
    BOOL_RESULT_OPS: frozenset[str]
    TARGET: str
    #: ops the target lacks -> ``fn(ops, *args)`` computing them with ops it has
    DECOMPOSITIONS: Mapping[str, Callable[..., Value]] = {}

    @classmethod
    def implements(cls, name: str) -> bool:
        """Whether op ``name`` is emitted directly: a method here or an entry of the table."""
        return name in cls.OPS or callable(getattr(cls, name, None))

    def declare(self, name: str, expr: str, dtype: torch.dtype) -> tuple[str, Value]:
        """The line that binds ``name`` to ``expr``, and the value it names."""
        raise NotImplementedError

    def before_op(self, name: str, args: tuple) -> None:
        """A hook run before an op of the table is emitted."""

    def _cse(self, expr: str, dtype: torch.dtype) -> Value:
        key = (expr, dtype)
        known = self.known(key)
        if known is not None:
            return known
        line, value = self.declare(self.kernel.new_tmp(), expr, dtype)
        self.out.line(line)
        return self.remember(key, value)

    def __getattr__(self, name: str) -> Callable[..., Value]:
        emitter = type(self).OPS.get(name)
        if emitter is None and name in type(self).DECOMPOSITIONS:
            return functools.partial(type(self).DECOMPOSITIONS[name], self)
        if emitter is None:
            raise AttributeError(f"the {type(self).TARGET} handler has no op named {name!r}")

        def op(*args: Any) -> Value:
            self.before_op(name, args)
            dtype = torch.bool if name in type(self).BOOL_RESULT_OPS else args[0].dtype
            return self._cse(emitter(*args), dtype)

        return op

    def __init__(self) -> None:
        self._scopes: list[dict[tuple, Value]] = [{}]
        #: positions in ``_scopes`` of the scopes that began a block of their own (an ``out``)
        self._blocks: list[int] = [0]

    def known(self, key: tuple) -> Value | None:
        for scope in reversed(self._scopes):
            if key in scope:
                return scope[key]
        return None

    def remember(self, key: tuple, value: Value) -> Value:
        self._scopes[-1][key] = value
        return value

    def remember_in_block(self, key: tuple, value: Value) -> Value:
        """Remember a value for the whole enclosing block, past the masked scopes it was made
        in: one that does not depend on their masks (a load proven in bounds without them)."""
        self._scopes[self._blocks[-1]][key] = value
        return value

    def forget(self, stale: Callable[[tuple], bool]) -> None:
        """Drop every remembered value whose key is ``stale`` (loads after a store)."""
        for scope in self._scopes:
            for key in [k for k in scope if stale(k)]:
                del scope[key]

    def reset_scopes(self) -> None:
        """Forget every value: the next code goes into a new block."""
        self._scopes = [{}]
        self._blocks = [0]

    @contextlib.contextmanager
    def scope(self, out: Any = None) -> Iterator[None]:
        """A nested block (optionally written to ``out``): values made inside stay inside."""
        saved = self.out
        self._scopes.append({})
        if out is not None:
            self.out = out
            self._blocks.append(len(self._scopes) - 1)
        try:
            yield
        finally:
            if out is not None:
                self._blocks.pop()
            self._scopes.pop()
            self.out = saved
