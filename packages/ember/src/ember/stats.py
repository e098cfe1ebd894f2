"""Process-wide counters of what the backends compiled and ran (for tests and reports).

`ember.counters["aot_eager"]["forward_graphs"]` and friends; `ember.reset()` clears them.
`counters["graph_break"]` counts the graph breaks compiled code takes, by reason (the
tracer's `graph_break` event), as torch.compile's own graph-break counter does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ember_events import subscribe

counters: defaultdict[str, Counter] = defaultdict(Counter)


def _count_break(reason: str, **_: Any) -> None:
    counters["graph_break"][reason] += 1


subscribe("graph_break", _count_break)


def clear() -> None:
    counters.clear()
