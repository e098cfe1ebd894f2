"""Common subexpressions of an ops handler, by (expression, dtype), in nested scopes: a value
made inside a block (a masked body, a loop) is not reused after the block. Shared by the C++
and Triton ops handlers, which differ only in how a new value is written."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")


class ScopedValues(Generic[Value]):
    out: Any  # the code writer new values go to (set by the handler)

    def __init__(self) -> None:
        self._scopes: list[dict[tuple, Value]] = [{}]

    def known(self, key: tuple) -> Value | None:
        for scope in reversed(self._scopes):
            if key in scope:
                return scope[key]
        return None

    def remember(self, key: tuple, value: Value) -> Value:
        self._scopes[-1][key] = value
        return value

    def reset_scopes(self) -> None:
        """Forget every value: the next code goes into a new block."""
        self._scopes = [{}]

    @contextlib.contextmanager
    def scope(self, out: Any = None) -> Iterator[None]:
        """A nested block (optionally written to ``out``): values made inside stay inside."""
        saved = self.out
        self._scopes.append({})
        if out is not None:
            self.out = out
        try:
            yield
        finally:
            self._scopes.pop()
            self.out = saved
