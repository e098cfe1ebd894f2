"""The generated wrapper's text and namespace as it is written (both targets)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .size_bindings import concrete, is_symbolic


@dataclass
class WrapperCode:
    source: str
    namespace: dict[str, Any]
    kernel_names: list[str] = field(default_factory=list)


class Writer:
    """The body of ``call`` line by line; objects that are not literals go to the
    namespace under generated names, so that the source stays printable."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._names: dict[int, str] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def const(self, value: Any, hint: str) -> str:
        """A namespace name for ``value`` (one per distinct object)."""
        if id(value) in self._names:
            return self._names[id(value)]
        name = f"_{hint}{len(self._names)}"
        self._names[id(value)] = name
        self.namespace[name] = value
        return name

    def literal(self, value: Any) -> str:
        """Python source for an extern argument that is not a tensor."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if is_symbolic(value):  # a size argument: this binding's value
            return repr(concrete(value))
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self.const(value, "c")
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.literal(v) for v in value)
            return (
                f"[{inner}]"
                if isinstance(value, list)
                else f"({inner}{',' if len(value) == 1 else ''})"
            )
        return self.const(value, "c")
