"""Conformance harness: PyTorch's own Dynamo test files, run by torch.compile and by Ember.

    python conformance/run.py [--upstream DIR] [--files test_exc.py ...] [--timeout 900] [-k EXPR]
                              [--shard K/N] [--test-timeout 300]

For each upstream file listed in conformance/files.toml and present under DIR (default
conformance/upstream; conformance/fetch.md says how to get them), pytest runs it twice in
subprocesses: as it is (torch.compile), and with conformance/ember_redirect.py loaded (`-p`),
which sends torch.compile and torch._dynamo.optimize to Ember. Per-test outcomes come from
`--junitxml`. Every test torch.compile passes and Ember fails is put in one class by the
RULES table below, read from the failure's traceback text. Writes conformance/results/<file>.json
(git-ignored; with --shard K/N, <file>.shard-K-of-N.json, and the report merges a file's shards),
prints a markdown table and puts it into docs/conformance.md. The plugin run_limits.py (both
runs) keeps the shard's tests and fails a test that runs past --test-timeout.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FILES_TOML = HERE / "files.toml"
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "conformance.md"
BEGIN, END = "<!-- conformance:begin -->", "<!-- conformance:end -->"
MODES = ("torch", "ember")
CLASSES = ("crash", "wrong_result", "count", "dynamo_internals", "refused", "other")


@dataclass(frozen=True)
class Rule:
    """A class when every field's text matches its pattern. Fields, from the traceback:
    error: the exception lines (pytest's `E` lines); innermost: the file of the innermost
    frame; where: the failing statement in the test file; body: the test's source pytest shows
    (its first entry in the test file); method: the entry of the test method itself."""

    cls: str
    patterns: dict[str, str]
    why: str


EMBER_CODE = r"/packages/\w+/src/|/site-packages/ember|/ember_\w+/|ember-cache"
BACKEND_CODE = r"/torch/_inductor/|/torch/_functorch/|/triton/"
COUNT = r"frame_count|op_count|graph_count|\bcnts?\b.*\bgraphs\b|len\(\s*[\w.]*graphs"
DYNAMO_READS = (
    r"counters\b|_dynamo\.utils|_dynamo\.config|_dynamo\.export|torch\.export|guard|"
    r"_dynamo_weak_dynamic_indices|getRecord|assertExpectedInline|munge_exc|comptime|"
    r"_dynamo\.exc|Unsupported|UserError|BackendCompilerFailed|logs_to_string|explain\("
)
VALUES = r"assertEqual|assertAlmostEqual|assert_close|allclose|same\(|assertTrue|assertFalse|assertIs|assert "
EXPECTS_DYNAMO_EXC = (
    r"(assertRaises\w*|assertExpectedInlineMunged)\(\s*"
    r"(torch\._dynamo\.exc\.|Unsupported|UserError|BackendCompilerFailed|\w*ValidationException)"
    r"|except\s+\(?torch\._dynamo\.exc\."
)
# PyTorch Inductor's own bookkeeping, which Ember's inductor neither updates nor produces: its
# kernel/IR counters and the generated code it logs (Inductor's tests read both)
INDUCTOR_READS = r"_inductor\.metrics|inductor_wrapper_call|run_\w*and_get_\w*code|FileCheck\(|no_indirect_indexing"
# a backend the test passes inspects Dynamo's own graph bookkeeping: its placeholder names
# (`l_x_`, `l_mod_buf`) or the static-input markers it puts in node meta
DYNAMO_GRAPH_BOOKKEEPING = r"_dynamo_static_input_type|\.name == [\"']l_\w+[\"']"

# Dynamo's own per-code cache, read or filled through torch._C._dynamo.eval_frame's debug and
# precompile API (Ember keeps its cache in its own frame hook, tested in its own words)
DYNAMO_CACHE_API = r"_debug_get_cache_entry_list|_load_precompile_entry|_reset_precompile_entries"
# the test patches a class of Dynamo's tracer and reads what Dynamo's instances of it did
DYNAMO_TRACER_PATCH = r"patch\.object\(\s*OutputGraph|TracingContext\.current_frame"

# First match wins.
RULES = (
    Rule(
        "dynamo_internals",
        {"body": EXPECTS_DYNAMO_EXC},
        "expects Dynamo's own exception type or message",
    ),
    Rule(
        "dynamo_internals",
        {"error": r"Unsupported.*(comptime|_Comptime|torch\._dynamo)"},
        "Ember refused a Dynamo-only API (comptime, torch._dynamo.*)",
    ),
    Rule(
        "refused",
        {"error": r"ember_bytecode_tracer\.exc\.Unsupported|ember\.exc\.Unsupported"},
        "Ember refused the code (its Unsupported), under fullgraph",
    ),
    Rule(
        "dynamo_internals",
        {"body": DYNAMO_GRAPH_BOOKKEEPING},
        "its backend reads Dynamo's graph bookkeeping (placeholder names, static-input meta)",
    ),
    Rule(
        "dynamo_internals",
        {"body": DYNAMO_CACHE_API},
        "reads or fills Dynamo's own per-code cache (its debug/precompile API), not Ember's",
    ),
    Rule(
        "dynamo_internals",
        {"body": DYNAMO_TRACER_PATCH},
        "patches a class of Dynamo's tracer (OutputGraph, TracingContext) and reads its calls",
    ),
    Rule(
        "dynamo_internals",
        # test_graph_break_compilation_metrics_on_failure: its only assertions read Dynamo's
        # metrics; the knob it patches after torch.compile() returned is mapped when compiling
        # (Ember reads its settings where a compile starts, config.py)
        {"method": r"_dynamo\.config\.suppress_errors[\s\S]*_compilation_metrics"},
        "reads Dynamo's compilation metrics, its backend failure silenced by a Dynamo knob",
    ),
    Rule(
        "dynamo_internals",
        # test_replay_side_effects_config: Dynamo's knob drops the user's list.append that
        # eager keeps; Ember always keeps it (the eager result, checked by the test before)
        {"body": r"replay_side_effects=False", "error": r"^AssertionError"},
        "a Dynamo knob (replay_side_effects=False) that drops a mutation eager makes",
    ),
    Rule(
        "dynamo_internals",
        # test_sym_max_creates_graph_node: dynamic=False makes both sizes static; Ember folds
        # torch.sym_max of two ints to the int (the value, asserted first, matches)
        {"where": r"nodes\)", "body": r"n\.target is torch\.sym_\w+"},
        "counts torch.sym_* nodes in Dynamo's graph; Ember folds them on static sizes",
    ),
    Rule(
        "dynamo_internals",
        # test_guard_filter_fn_by_id: Dynamo bakes id(x) into its graph and, its ID_MATCH
        # guard filtered out, returns the first call's id; Ember computes id() at run time
        # (the eager value), with no guard to filter
        {"body": r"guard_filter_fn[\s\S]*return id\(", "where": r"id\("},
        "expects the stale id() Dynamo reuses once guard_filter_fn drops its ID_MATCH guard",
    ),
    Rule(
        "crash",
        {"error": r"ember\w*\.\w+\.(BackendCompilerFailed|TracerError|EmberError)"},
        "an Ember error",
    ),
    Rule("crash", {"innermost": EMBER_CODE}, "raised from Ember's code"),
    Rule("crash", {"innermost": BACKEND_CODE}, "raised from a backend"),
    Rule(
        "dynamo_internals",
        {"innermost": r"/torch/_dynamo/(?!test_case|testing)|/torch/fx/exp"},
        "raised inside torch._dynamo / fx.experimental, which the test calls directly",
    ),
    Rule(
        "dynamo_internals",
        {"where": COUNT, "body": r"_dynamo\.config|config\.patch"},
        "a count that depends on Dynamo config knobs the test sets",
    ),
    Rule(
        "dynamo_internals",
        {"where": INDUCTOR_READS},
        "reads PyTorch Inductor's counters (torch._inductor.metrics) or its generated code",
    ),
    Rule(
        "dynamo_internals",
        {"body": r"fallback_random|profiler_mark_wrapper_call", "error": r"AssertionError|assert "},
        "its assertion depends on an Inductor config knob (fallback_random, profiler marks)",
    ),
    Rule(
        "dynamo_internals",
        # test_numpy_readonly: torch.compile hands back a writeable copy of a read-only
        # array it returns; Ember returns what eager does (the array itself)
        {"where": r"#\s*XXX: differs from numpy"},
        "asserts torch.compile's own deviation from NumPy, which the test marks (XXX)",
    ),
    Rule("count", {"where": COUNT}, "a frame/op/graph count assertion"),
    Rule(
        "dynamo_internals",
        {"where": DYNAMO_READS},
        "reads Dynamo counters/config/logs/exceptions/guards",
    ),
    Rule("wrong_result", {"where": VALUES, "error": r"AssertionError"}, "a value assertion"),
)


# the line that ends a pytest traceback entry: `path.py:12: ` (and the exception name on the last)
LOCATION = re.compile(r"^(\S+\.py):(\d+):(?: (\S+))?\s*$")


def in_test_file(path: str, test_file: str) -> bool:
    """Whether a traceback entry's file holds the test's own code: the test file, or a part it
    is composed from (test_misc.py's MiscTests mixes in `_test_misc_part1.py`...)."""
    name, stem = Path(path).name, Path(test_file).stem
    return name == test_file or re.fullmatch(rf"_{re.escape(stem)}_\w+\.py", name) is not None


def failing_parts(text: str, test_file: str) -> dict[str, str]:
    """Split a pytest long traceback into the fields the RULES read: where is every failing
    statement (`>` lines) of the entries in the test file, body the first such entry (the
    test method's source)."""
    lines = text.splitlines()
    error = "\n".join(line[1:].strip() for line in lines if line.startswith("E "))
    locations = [m for line in lines if (m := LOCATION.match(line))]
    innermost = locations[-1].group(1) if locations else ""
    where, bodies, entry = [], [], []
    for line in lines:
        m = LOCATION.match(line)
        if not m:
            entry.append(line)
            continue
        if in_test_file(m.group(1), test_file):
            bodies.append("\n".join(entry))
            where += [x[1:] for x in entry if x.startswith(">")]
        entry = []
    body = bodies[0] if bodies else ""
    # the test method's own entry (a chained exception's cause, printed first, may start in
    # a helper of the test file: a backend it defines)
    method = next((b for b in bodies if re.search(r"^\s*def test_", b, re.M)), body)
    return {
        "error": error,
        "innermost": innermost,
        "where": "\n".join(where),
        "body": body,
        "method": method,
    }


def classify(text: str, test_file: str) -> tuple[str, str]:
    parts = failing_parts(text, test_file)
    for rule in RULES:
        if all(re.search(p, parts[f]) for f, p in rule.patterns.items()):
            return rule.cls, rule.why
    return "other", "no rule matched"


def read_junit(path: Path) -> dict[str, dict]:
    """test id -> {outcome, message, text}; outcome passed, failed, error, skipped or xfail."""
    tests = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.attrib.get('classname', '').rsplit('.', 1)[-1]}::{case.attrib['name']}"
        outcome, message, text = "passed", "", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag if child.tag != "failure" else "failed"
                if child.tag == "skipped" and "xfail" in child.attrib.get("type", ""):
                    outcome = "xfail"
                message, text = child.attrib.get("message", ""), child.text or ""
                break
        tests[name] = {"outcome": outcome, "message": message, "text": text}
    return tests


def pytest_command(path: Path, mode: str, junit: Path, select: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider"]
    if select:  # a -k expression: the file's own (files.toml `pytest_k`) and/or the command's
        cmd += ["-k", select]
    # pytest's logging plugin adds handlers to the pt2 loggers, which PyTorch's LoggingTestCase
    # counts (at most two): without -p no:logging its logging tests fail under torch.compile too
    cmd += ["-p", "no:logging", "--tb=long", f"--junitxml={junit}", "-o", "junit_logging=no"]
    # names an older stored upstream file imports that the installed torch lacks (both runs)
    cmd += ["-p", "upstream_compat", "-p", "run_limits"]
    if mode == "ember":
        cmd += ["-p", "ember_redirect"]
    return cmd


def run_pytest(cmd: list[str], cwd: Path, timeout: int, limits: dict[str, str]) -> dict:
    env = dict(os.environ, PYTORCH_PRINT_REPRO_ON_FAILURE="0", **limits)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env.setdefault("EMBER_CACHE_DIR", "/tmp/ember-cache-conformance")
    start = datetime.datetime.now(datetime.UTC)
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    seconds = (datetime.datetime.now(datetime.UTC) - start).total_seconds()
    tail = "\n".join(out.splitlines()[-3:])
    # the redirect's summary line: how many compiles reached Ember (0 would mean it did not take)
    calls = re.search(r"ember_redirect: (\d+) calls", out)
    return {"rc": proc.returncode, "timed_out": timed_out, "seconds": round(seconds, 1),
            "tail": tail, "ember_calls": int(calls.group(1)) if calls else None}  # fmt: skip


def outcome_line(run: dict) -> str:
    last = run["tail"].splitlines()[-1] if run["tail"] else ""
    calls = "" if run["ember_calls"] is None else f", {run['ember_calls']} compiles by Ember"
    return f"{last} ({run['seconds']} s{calls}{', TIMED OUT' if run['timed_out'] else ''})"


def compare(torch_tests: dict, ember_tests: dict, test_file: str) -> dict[str, dict]:
    """Per test: both outcomes, and the class of an Ember failure where torch.compile passed."""
    rows = {}
    for name, ref in sorted(torch_tests.items()):
        got = ember_tests.get(name, {"outcome": "missing", "message": "", "text": ""})
        row = {"torch": ref["outcome"], "ember": got["outcome"]}
        if ref["outcome"] == "passed" and got["outcome"] != "passed":
            cls, why = classify(got["message"] + "\n" + got["text"], test_file)
            first = next((ln for ln in got["message"].splitlines() if ln.strip()), "")
            row.update({"class": cls, "why": why, "message": local_paths_out(first)[:300]})
        rows[name] = row
    return rows


def local_paths_out(text: str) -> str:
    """A message without this machine's folders (the docs are committed)."""
    text = re.sub(r"/\S*/((?:test|packages|torch)/)", r"\1", text)
    return text.replace(str(ROOT) + os.sep, "")


def summarize(rows: dict[str, dict]) -> dict:
    ref_pass = [r for r in rows.values() if r["torch"] == "passed"]
    ember_pass = [r for r in ref_pass if r["ember"] == "passed"]
    by_class = {c: sum(r.get("class") == c for r in ref_pass) for c in CLASSES}
    return {"tests": len(rows), "torch_passes": len(ref_pass), "ember_passes": len(ember_pass),
            "by_class": by_class,
            "ember_only_passes": sum(r["torch"] != "passed" and r["ember"] == "passed"
                                     for r in rows.values())}  # fmt: skip


def selection(entry: dict, extra: str | None) -> str | None:
    """The -k expression for a file: files.toml's `pytest_k` (e.g. Inductor's CPU test class)
    and the command's -k, both applying."""
    parts = [f"({k})" for k in (entry.get("pytest_k"), extra) if k]
    return " and ".join(parts) or None


def result_name(stem: str, shard: str | None) -> str:
    if not shard:
        return f"{stem}.json"
    k, n = shard.split("/")
    return f"{stem}.shard-{k}-of-{n}.json"


def same_reference(previous: Path, digest: str, select: str | None) -> bool:
    """Whether the last result measured torch.compile on this very file, torch and slice."""
    if not previous.exists():
        return False
    last = json.loads(previous.read_text())
    return (
        last["sha256"] == digest
        and last["torch"] == importlib.metadata.version("torch")
        and last["selection"] == select
        and (RESULTS / f"{previous.stem}.torch.xml").exists()
    )


def run_file(entry: dict, upstream: Path, args: argparse.Namespace) -> dict | None:
    path = upstream / entry["path"]
    if not path.exists():
        print(f"-- {entry['path']}: not present under {upstream}; see conformance/fetch.md")
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        print(f"!! {entry['path']}: sha256 {digest[:12]} differs from files.toml's "
              f"{entry['sha256'][:12]} (another upstream version): results may differ")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    junits, commands, runs, tests = {}, {}, {}, {}
    select = selection(entry, args.k)
    limits = {"EMBER_CONFORMANCE_TEST_TIMEOUT": str(args.test_timeout)}
    if args.shard:
        limits["EMBER_CONFORMANCE_SHARD"] = args.shard
    stem = path.stem + (f".shard-{args.shard.replace('/', '-of-')}" if args.shard else "")
    previous = RESULTS / result_name(path.stem, args.shard)
    if args.reclassify and not previous.exists():  # nothing to classify again (or shards only:
        return file_result(path.stem)  # the report merges those as they are)
    reuse = args.reclassify
    reuse_torch = args.reuse_torch and same_reference(previous, digest, select)
    for mode in MODES:
        junits[mode] = RESULTS / f"{stem}.{mode}.xml"
        if reuse or (mode == "torch" and reuse_torch):  # the last run's outcomes (classified
            # again by the current RULES), or torch.compile's of the same file, torch and slice
            commands[mode] = json.loads(previous.read_text())["pytest"].get(mode, "")
            runs[mode] = json.loads(previous.read_text())["runs"][mode]
            tests[mode] = read_junit(junits[mode]) if junits[mode].exists() else {}
            continue
        junits[mode].unlink(missing_ok=True)
        cmd = pytest_command(path, mode, junits[mode], select)
        commands[mode] = shlex.join(cmd)
        print(f"-- {entry['path']} [{mode}] ...", flush=True)
        runs[mode] = run_pytest(cmd, upstream, args.timeout, limits)
        print("   " + outcome_line(runs[mode]), flush=True)
        tests[mode] = read_junit(junits[mode]) if junits[mode].exists() else {}
    rows = compare(tests["torch"], tests["ember"], path.name)
    result = {
        "file": entry["path"], "commit": entry["commit"], "sha256": digest,
        "sha256_matches": digest == entry["sha256"],
        "torch": importlib.metadata.version("torch"), "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "command": "python conformance/run.py " + shlex.join(sys.argv[1:]),
        "pytest": commands, "runs": runs, "summary": summarize(rows), "tests": rows,
        "selection": select, "shard": args.shard,
    }  # fmt: skip
    if reuse:  # still the measurement it was: its date, command and pytest lines
        result.update(
            {k: json.loads(previous.read_text())[k] for k in ("date", "command", "pytest")}
        )
    (RESULTS / result_name(path.stem, args.shard)).write_text(json.dumps(result, indent=1) + "\n")
    return result


def shares(passes: int, torch_passes: int, internals: int) -> list[str]:
    """Ember's share of torch.compile's passes, and the same without the tests that check
    Dynamo's own bookkeeping (which no other compiler can pass)."""
    whole = f"{passes / torch_passes:.0%}" if torch_passes else "-"
    rest = torch_passes - internals
    return [whole, f"{passes / rest:.0%}" if rest else "-"]


def table(results: list[dict]) -> str:
    head = ["file", "tests", "torch.compile passes", "Ember passes (of those)", "Ember's share",
            "share without Dynamo internals", *CLASSES, "commit", "date", "command"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    total = {"tests": 0, "torch_passes": 0, "ember_passes": 0, **dict.fromkeys(CLASSES, 0)}
    for res in results:
        s = res["summary"]
        share = shares(s["ember_passes"], s["torch_passes"], s["by_class"]["dynamo_internals"])
        timed = " (timed out)" if any(r["timed_out"] for r in res["runs"].values()) else ""
        timed += f" ({res['shards']})" if res.get("shards") else ""
        cells = [f"`{res['file']}`{timed}", s["tests"], s["torch_passes"], s["ember_passes"],
                 *share, *(s["by_class"][c] for c in CLASSES), f"`{res['commit'][:12]}`",
                 res["date"], f"`{res['command'].strip()}`"]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
        for key in ("tests", "torch_passes", "ember_passes"):
            total[key] += s[key]
        for c in CLASSES:
            total[c] += s["by_class"][c]
    if len(results) > 1:
        share = shares(total["ember_passes"], total["torch_passes"], total["dynamo_internals"])
        cells = ["**all**", total["tests"], total["torch_passes"], total["ember_passes"], *share,
                 *(total[c] for c in CLASSES), "", "", ""]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def failure_lists(results: list[dict]) -> str:
    out = ["### Wrong results (torch.compile right, Ember wrong)", ""]
    wrong = [(r["file"], n, t) for r in results for n, t in r["tests"].items()
             if t.get("class") == "wrong_result"]  # fmt: skip
    out += [f"- `{f}::{n}`: {t['message']}" for f, n, t in wrong] or ["- none"]
    out += ["", "### Every Ember failure where torch.compile passes, by class", ""]
    for cls in CLASSES:
        names = [(r["file"], n, t) for r in results for n, t in r["tests"].items()
                 if t.get("class") == cls]  # fmt: skip
        if names:
            out.append(f"**{cls}** ({len(names)})")
            out += [f"- `{Path(f).name}::{n}`: {t['message'][:160]}" for f, n, t in names]
            out.append("")
    return "\n".join(out)


def merged_shards(paths: list[Path]) -> dict:
    """One file's result from its shards' results: tests united, counts recomputed; marked
    partial while shards of the same N are missing."""
    parts = [json.loads(p.read_text()) for p in paths]
    n = int(parts[0]["shard"].split("/")[1])
    seen = sorted(int(p["shard"].split("/")[0]) for p in parts)
    rows = {name: row for p in parts for name, row in p["tests"].items()}
    merged = dict(parts[-1], tests=rows, summary=summarize(rows), shard=None)
    merged["runs"] = {f"{p['shard']} {m}": r for p in parts for m, r in p["runs"].items()}
    merged["date"] = max(p["date"] for p in parts)
    merged["command"] = re.sub(r"--shard \S+", f"--shard K/{n}", parts[-1]["command"])
    merged["shards"] = f"{len(seen)} of {n} shards" if len(seen) < n else None
    return merged


def file_result(stem: str) -> dict | None:
    """A file's latest measurement: its whole-file result or the merge of its shards, whichever
    was written last (shards of the latest N only)."""
    whole = RESULTS / f"{stem}.json"
    shards = sorted(RESULTS.glob(f"{stem}.shard-*-of-*.json"), key=lambda p: p.stat().st_mtime)
    if shards:
        n = shards[-1].name.rsplit("-of-", 1)[1]
        shards = [p for p in shards if p.name.endswith(f"-of-{n}")]
    if shards and (not whole.exists() or whole.stat().st_mtime < shards[-1].stat().st_mtime):
        return merged_shards(shards)
    return json.loads(whole.read_text()) if whole.exists() else None


def report(entries: list[dict]) -> str:
    results = [r for e in entries if (r := file_result(Path(e["path"]).stem))]
    if not results:
        return "No results yet: fetch the upstream files (conformance/fetch.md) and run."
    versions = sorted(
        {f"torch {r.get('torch', '?')}, Python {r.get('python', '?')}" for r in results}
    )
    head = f"Measured with {'; '.join(versions)} (CPU).\n\n"
    return head + table(results) + "\n\n" + failure_lists(results)


def write_doc(text: str) -> None:
    doc = DOC.read_text() if DOC.exists() else f"# Conformance\n\n{BEGIN}\n{END}\n"
    before, rest = doc.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    DOC.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--upstream",
        type=Path,
        default=HERE / "upstream",
        help="folder holding test/dynamo/... (a pytorch checkout works)",
    )
    parser.add_argument("--files", nargs="*", help="only these file names (test_exc.py ...)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per pytest run")
    parser.add_argument("-k", dest="k", help="pytest -k expression: run only a slice")
    parser.add_argument(
        "--shard", help="K/N: only the K-th of N interleaved slices of each file's tests"
    )
    parser.add_argument(
        "--test-timeout", type=int, default=300, help="seconds one test may run (0: no limit)"
    )
    parser.add_argument(
        "--reclassify",
        action="store_true",
        help="run nothing: classify the last run's outcomes again (after a change to RULES)",
    )
    parser.add_argument(
        "--reuse-torch",
        action="store_true",
        help="run Ember only: keep torch.compile's outcomes from the last run of the same file,"
        " torch version and slice (after a change to Ember, half the time)",
    )
    parser.add_argument("--no-doc", action="store_true", help="leave docs/conformance.md")
    args = parser.parse_args()  # fmt: skip
    entries = tomllib.loads(FILES_TOML.read_text())["file"]
    chosen = [e for e in entries if not args.files or Path(e["path"]).name in args.files]
    upstream = args.upstream.resolve()
    ran = [r for e in chosen if (r := run_file(e, upstream, args))]
    if not ran:
        print("No upstream file present: see conformance/fetch.md to fetch them.")
        return 1
    text = report(entries)
    print("\n" + text)
    if not args.no_doc:
        write_doc(text)
        print(f"\nwritten to {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
