"""Merge the --json outputs of sharded sweeps (`sweep.py --shard K/N --json PATH`) into one
pass count per backend and phase, with the failures by category.

    python integration_tests/opinfo/merge_shards.py shard0.json shard1.json ... \
        [--write-known-failures]
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path


def main(paths: list[str]) -> None:
    write = "--write-known-failures" in paths
    paths = [p for p in paths if p != "--write-known-failures"]
    outcomes: dict[str, dict[str, str]] = {}
    for path in paths:
        outcomes.update(json.loads(Path(path).read_text()))
    if write:  # the first failing phase of each (backend, entry), as sweep.py writes it
        from sweep import write_known_failures

        failures: dict[tuple[str, str], str] = {}
        for key, outcome in sorted(outcomes.items(), key=lambda kv: "backward" in kv[0]):
            backend, _, entry = key.split(" ", 2)
            if outcome["status"] == "fail":
                failures.setdefault((backend, entry), outcome.get("reason", outcome["category"]))
        write_known_failures(failures)
    groups: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter
    )
    for key, outcome in outcomes.items():
        backend, phase, _ = key.split(" ", 2)
        label = outcome["status"] if outcome["status"] != "fail" else f"fail {outcome['category']}"
        groups[(backend, phase)][label] += 1
    for (backend, phase), counts in sorted(groups.items()):
        total = sum(counts.values())
        passed = counts["pass"]
        print(f"{backend} {phase}: {passed}/{total} = {100 * passed / total:.1f}% pass; "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "pass"))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
