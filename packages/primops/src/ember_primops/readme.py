"""Generate the prim tables of README.md from the registry.

``python -m ember_primops.readme --write`` rewrites the block between the ``prims:begin`` and
``prims:end`` markers; ``--check`` exits 1 when the README is stale.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from . import all_prims
from . import random as random_prims
from ._registry import CATEGORIES

BEGIN, END = "<!-- prims:begin -->", "<!-- prims:end -->"
README = Path(__file__).resolve().parents[2] / "README.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The generated Markdown block (without the markers)."""
    by_category = collections.defaultdict(list)
    for prim in all_prims():
        by_category[prim.category].append(prim)
    counts = ", ".join(f"{c} {len(by_category[c])}" for c in CATEGORIES if by_category[c])
    lines = [
        f"**{len(all_prims())} prims** in the `ember_prims` namespace ({counts}).",
        "",
    ]
    for category in CATEGORIES:
        prims = by_category[category]
        if not prims:
            continue
        lines += [
            f"### {category} ({len(prims)})",
            "",
            "| name | schema | notes |",
            "|---|---|---|",
        ]
        for p in prims:
            schema = p.schema.split("(", 1)[1].rsplit(")", 1)
            signature = f"({schema[0]}){schema[1]}"
            tags = [t for t in p.tags if t not in ("pointwise", "reduction")]
            notes = p.notes + (f" [{', '.join(tags)}]" if tags else "")
            lines.append(f"| `{p.name}` | `{_cell(signature)}` | {_cell(notes)} |")
        lines.append("")
    lines += ["### Random number algorithm", "", "```text"]
    lines += [line.rstrip() for line in random_prims.__doc__.strip().splitlines()]
    lines += ["```", ""]
    return "\n".join(lines)


def updated(text: str) -> str:
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"README lacks the {BEGIN} / {END} markers")
    return f"{head}{BEGIN}\n{render()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite README.md in place")
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is stale")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    new = updated(text)
    if args.write:
        args.readme.write_text(new)
    elif args.check:
        if new != text:
            print(f"{args.readme} is stale: run python -m ember_primops.readme --write")
            return 1
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
