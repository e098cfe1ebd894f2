"""Process-wide counters of what the backends compiled and ran (for tests and reports).

`ember.counters["aot_eager"]["forward_graphs"]` and friends; `ember.reset()` clears them.
"""

from __future__ import annotations

from collections import Counter, defaultdict

counters: defaultdict[str, Counter] = defaultdict(Counter)


def clear() -> None:
    counters.clear()
