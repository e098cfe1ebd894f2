"""Merge `zoo_baseline.py --json` files (one per model, e.g. run in parallel processes) into one
table of speedups over eager, with the geomean per compiler and mode.

    python benchmarks/merge_zoo_json.py out/*.json
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def main(paths: list[str]) -> None:
    rows = [row for path in paths for row in json.loads(Path(path).read_text())["rows"]]
    compilers = [c for c in rows[0]["results"] if c != "eager"] if rows else []
    print("| model | mode | " + " | ".join(compilers) + " |")
    print("|---|---|" + "---:|" * len(compilers))
    logs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r["model"], r["mode"])):
        cells = []
        for compiler in compilers:
            result = row["results"].get(compiler, {})
            speedup = result.get("speedup")
            if speedup and result.get("matches", True):
                logs[(compiler, row["mode"])].append(math.log(speedup))
                cells.append(f"{speedup:.2f}x")
            else:
                cells.append("fails" if result.get("error") else "mismatch")
        print(f"| {row['model']} | {row['mode']} | " + " | ".join(cells) + " |")
    for mode in ("infer", "train"):
        parts = [
            f"{c} {math.exp(sum(logs[(c, mode)]) / len(logs[(c, mode)])):.2f}x "
            f"({len(logs[(c, mode)])} models)"
            for c in compilers
            if logs[(c, mode)]
        ]
        print(f"geomean speedup over eager, {mode}: " + ", ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
