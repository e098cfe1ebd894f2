"""One frame compile at a time, process-wide: threads racing a cold frame share its compile.

The frame hook looks a starting frame up in its code object's cache without any lock and
calls the frame compiler on a miss, so threads that start the same cold code together all
miss. Each of them then waits for `COMPILE_LOCK` and, holding it, looks at the code's cache
as it is *now* (the hook's `CacheView` is what it saw before the wait): an entry another
thread cached meanwhile whose guard passes for this frame runs as it is (`cached_fit`); only
a frame that still misses is compiled, and its entry goes into the cache (`cache_insert`)
before the lock is let go, so the next thread in line finds it. The cache limit is then
counted on the entries the code object really has, never on compiles that raced.

As torch.compile's compile lock, it is held while a frame is compiled, never while compiled
code runs (the hook runs the entry after the compiler returns). It is reentrant: a compile
that starts another in its own thread (a backend calling compiled code) does not deadlock.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass
from typing import Any

import ember_frame_hook as fh

COMPILE_LOCK = threading.RLock()


@dataclass(frozen=True)
class LiveCache:
    """A code object's cache entries under the lock, in the shape of the hook's CacheView."""

    code: types.CodeType
    entries: tuple
    limit: int

    @property
    def full(self) -> bool:
        return len(self.entries) >= self.limit


def live_cache(code: types.CodeType, limit: int) -> LiveCache:
    return LiveCache(code, tuple(fh.cache_entries(code)), limit)


def cached_fit(before: Any, now: LiveCache, f_locals: dict[str, Any]) -> fh.GuardedCode | None:
    """An entry cached since the hook's own lookup (`before`: its guards all failed there)
    whose guard passes for this frame, or None."""
    tried = {id(entry) for entry in before.entries}  # `before` keeps them alive: ids hold
    for entry in now.entries:
        if id(entry) not in tried and entry.guard(f_locals):
            return entry
    return None
