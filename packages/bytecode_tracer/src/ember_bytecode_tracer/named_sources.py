"""Inputs named by the user as dynamic: `ember.config.dynamic_sources`.

The setting is a comma-separated list of entries. Each entry names a source as guard reports
show it (`L['x']`, `L['self']._modules['lin']._parameters['weight']`): either that exact
name or a regular expression matched at the start of the name (`re.match`). An entry may end
in `:N` to name dim N of a tensor only; without it every dim is named. An int read at a named
source is symbolic from the first compile (0 and 1 included); a named tensor dim is symbolic
from the first compile (sizes 0 and 1 still specialize, with a guard). A name wins over
`dynamic=False` and over static parameter shapes: the user asked for that input explicitly.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger("ember.dynamic")

_DIM_SUFFIX = re.compile(r"^(.+):(\d+)$")


@dataclass(frozen=True)
class NamedSources:
    """The parsed list: (pattern, dim or None) per entry."""

    entries: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def parse(cls, text: str | NamedSources | None) -> NamedSources:
        if isinstance(text, NamedSources):
            return text
        if text is not None and not isinstance(text, str):
            raise TypeError(f"dynamic_sources must be a str, got {type(text).__name__}")
        entries = []
        for entry in (text or "").replace(" ", "").split(","):
            if not entry:
                continue
            m = _DIM_SUFFIX.match(entry)
            pattern, dim = (m.group(1), int(m.group(2))) if m else (entry, None)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"dynamic_sources: {pattern!r} is not a valid regex: {exc}"
                ) from exc
            entries.append((pattern, dim))
        return cls(tuple(entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def names(self, name: str, dim: int | None = None) -> bool:
        """Whether an entry names `name` (and, given `dim`, that dim of it)."""
        for pattern, pat_dim in self.entries:
            matches = pattern == name or re.match(pattern, name) is not None
            if matches and (dim is None or pat_dim is None or pat_dim == dim):
                log.debug("%s is dynamic: named by dynamic_sources entry %r", name, pattern)
                return True
        return False

    def dims(self, name: str, ndim: int) -> set[int]:
        """The dims of a tensor read at `name` that an entry names."""
        if not self.entries:
            return set()
        return {d for d in range(ndim) if self.names(name, d)}
