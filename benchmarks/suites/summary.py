"""Merge run.py's JSON lines into markdown tables, one per suite and mode.

    python benchmarks/suites/summary.py results/*.jsonl > table.md
    python benchmarks/suites/summary.py --update docs/performance.md results/h200/*.jsonl
    python benchmarks/suites/summary.py --pending results/h200/*.jsonl

`--pending` lists, per suite and mode, the models with no measured record yet (in the suite's
order, a comma list for run.py's --models or suites_parallel.sh's LANES): what the next
device sessions run.

Per (suite, mode): models run, pass rate of each compiler (a compiler passes a model when its
output matched eager's at the suite's tolerance), geomean speedup over eager of each compiler
(over the models where it passed), geomean of Ember's speedup over torch.compile's (models
where both passed), geomean peak-memory and compile-time ratios Ember / torch.compile, the
models where Ember runs below 0.9x torch.compile's speed, and where each record came from
(date, commit, machine, command). The last record of a (suite, model, mode) wins, but a
record of a model that was not run (a timeout) does not replace a measured one.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

SLOW = 0.9  # Ember below this fraction of torch.compile's speed is named


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt(value: float | None, suffix: str = "x") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def load(paths: list[str]) -> dict[tuple[str, str], dict[str, dict]]:
    groups: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                group = groups[(record["suite"], record["mode"])]
                earlier = group.get(record["model"])
                if "compilers" not in record and earlier and "compilers" in earlier:
                    continue  # a later run that did not finish leaves the measurement
                group[record["model"]] = record
    return groups


def _ratio(a: dict, b: dict, key: str) -> float | None:
    if a.get(key) and b.get(key) and a.get("passes") and b.get("passes"):
        return a[key] / b[key]
    return None


def table(suite: str, mode: str, records: dict[str, dict]) -> list[str]:
    ran = [r for r in records.values() if "compilers" in r]
    compilers = list(dict.fromkeys(c for r in ran for c in r["compilers"]))
    lines = [f"### {suite}, {mode}", ""]
    skipped = sorted(f"{m} ({r.get('skipped') or r.get('error')})"
                     for m, r in records.items() if "compilers" not in r)  # fmt: skip
    lines += ["| compiler | pass rate | geomean speedup over eager | geomean first-call s |",
              "|---|---:|---:|---:|"]  # fmt: skip
    for name in compilers:
        results = [r["compilers"].get(name, {}) for r in ran]
        passed = [x for x in results if x.get("passes")]
        speed = geomean([x.get("speedup") for x in passed])
        first = geomean([x.get("first_call_s") for x in passed])
        lines.append(f"| {name} | {len(passed)}/{len(ran)} | {_fmt(speed)} | {_fmt(first, '')} |")
    lines += ["", *_ember_vs_compile(ran, compilers), *_rows(ran, compilers)]
    if skipped:
        lines += ["", "Not run: " + "; ".join(skipped) + "."]
    lines += ["", *_provenance(records.values())]
    return lines


def _ember_vs_compile(ran: list[dict], compilers: list[str]) -> list[str]:
    if not {"ember", "torch.compile"} <= set(compilers):
        return []
    pairs = [(r["model"], r["compilers"]["ember"], r["compilers"]["torch.compile"]) for r in ran]
    speed = [(m, _ratio(e, t, "speedup")) for m, e, t in pairs]
    memory = geomean([_ratio(e, t, "peak_mb") for _, e, t in pairs])
    compile_s = geomean([_ratio(e, t, "compile_s") for _, e, t in pairs])
    slow = [f"{m} {s:.3f}" for m, s in speed if s is not None and s < SLOW]
    lanes = sorted({r["compile_lanes"] for r in ran if r.get("compile_lanes", 1) > 1})
    shared = (f" Cold compiles in {' or '.join(map(str, lanes))} processes at once on the "
              "host's cores (run.py --compile-lanes: a process a model until f1f89a3, a model "
              "and compiler since) for the records whose command says so."
              if lanes else "")  # fmt: skip
    return [
        f"Ember / torch.compile: geomean speedup ratio {_fmt(geomean([s for _, s in speed]))}, "
        f"peak memory ratio {_fmt(memory)}, cold compile time ratio {_fmt(compile_s)}.{shared}",
        f"Below {SLOW}x torch.compile's speed: {', '.join(slow) if slow else 'none'}.",
        "",
    ]


def _rows(ran: list[dict], compilers: list[str]) -> list[str]:
    header = ["model", "batch"] + [f"{c} speedup" for c in compilers if c != "eager"]
    header += ["Ember graphs", "compile s (tc / Ember)", "peak MB (eager / tc / Ember)"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for r in sorted(ran, key=lambda r: r["model"]):
        res = r["compilers"]
        cells = [r["model"], str(r.get("batch", "-"))]
        for name in compilers:
            if name == "eager":
                continue
            x = res.get(name, {})
            cells.append(_fmt(x.get("speedup")) if x.get("passes") else _failure(x))
        ember, tc = res.get("ember", {}), res.get("torch.compile", {})
        cells.append(str(ember.get("graphs", "-")))
        cells.append(f"{_fmt(tc.get('compile_s'), '')} / {_fmt(ember.get('compile_s'), '')}")
        peaks = [res.get(c, {}).get("peak_mb") for c in ("eager", "torch.compile", "ember")]
        cells.append(" / ".join("-" if p is None else f"{p:.0f}" for p in peaks))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _failure(result: dict) -> str:
    if result.get("error"):
        return "fails: " + result["error"][:80].replace("|", "/")
    return "mismatch" if result else "-"


def _provenance(records) -> list[str]:
    envs = {json.dumps(r["env"], sort_keys=True) for r in records if "env" in r}
    out = []
    for text in sorted(envs):
        env = json.loads(text)
        out.append(f"- {env['date']}, commit {env['commit']}, {env['machine']} "
                   f"({env['threads']} threads), torch {env['torch']}, transformers "
                   f"{env['transformers']}: `{env['command']}`")  # fmt: skip
    return out


def update(doc: Path, groups: dict[tuple[str, str], dict[str, dict]]) -> list[str]:
    """Replace each (suite, mode) table of `doc` in place; returns the tables replaced.

    A table lives under a `#### SUITE, MODE ...` heading (the heading's own words after the
    mode are kept) inside a `## ` section whose title names the records' machine kind, "(GPU"
    or "(CPU", since both kinds have tables of the same suite and mode. It runs from the
    heading to the end of its provenance list (the last item's indented lines included).
    """
    lines = doc.read_text().splitlines()
    done = []
    for (suite, mode), records in sorted(groups.items()):
        devices = {r.get("device") for r in records.values() if "compilers" in r}
        kind = "(CPU" if devices == {"cpu"} else "(GPU"
        start = _table_heading(lines, f"#### {suite}, {mode}", kind)
        if start is None:
            continue
        end = start + 1
        while end < len(lines) and not lines[end].startswith("#"):
            end += 1
        last = max((i for i in range(start, end) if _PROVENANCE.match(lines[i])), default=None)
        if last is None:
            raise SystemExit(f"{doc}: the table under {lines[start]!r} has no provenance list")
        while last + 1 < end and lines[last + 1].startswith("  "):
            last += 1  # the last item's continuation lines
        lines[start + 1 : last + 1] = table(suite, mode, records)[1:]
        done.append(f"{suite}, {mode}")
    doc.write_text("\n".join(lines) + "\n")
    return done


_PROVENANCE = re.compile(r"^- \d{4}-\d\d-\d\d \d\d:\d\d UTC, commit ")


def _table_heading(lines: list[str], heading: str, kind: str) -> int | None:
    section = ""
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line
        elif kind in section and (line == heading or line.startswith(heading + " ")):
            return i
    return None


MODES = ("infer-bf16", "train-bf16", "infer-fp32")  # run.py's modes (it imports torch)


def pending(groups: dict[tuple[str, str], dict[str, dict]]) -> list[str]:
    """`SUITE MODE (COUNT): MODEL,MODEL,...` for each suite and mode with unmeasured models."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from models import SUITES

    out = []
    for suite, table in SUITES.items():
        for mode in MODES:
            done = {m for m, r in groups.get((suite, mode), {}).items() if "compilers" in r}
            todo = [e.name for e in table if e.name not in done]
            if todo:
                out.append(f"{suite} {mode} ({len(todo)} of {len(table)}): {','.join(todo)}")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="run.py's JSON-lines files")
    parser.add_argument("--update", type=Path, metavar="DOC",
                        help="rewrite the tables of DOC (docs/performance.md) in place")  # fmt: skip
    parser.add_argument("--pending", action="store_true",
                        help="list each suite and mode's models with no measured record")  # fmt: skip
    args = parser.parse_args(argv)
    groups = load(args.results)
    if args.pending:
        print("\n".join(pending(groups)) or "every model of every suite and mode measured")
        return 0
    if args.update:
        done = update(args.update, groups)
        missing = sorted(f"{s}, {m}" for s, m in groups if f"{s}, {m}" not in done)
        print(
            f"updated: {'; '.join(done) or 'none'}"
            + (f"; no table for: {'; '.join(missing)}" if missing else "")
        )
        return 0
    for (suite, mode), records in sorted(groups.items()):
        print("\n".join(table(suite, mode, records)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
