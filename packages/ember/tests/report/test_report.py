"""`python -m ember.report`: the trace as one self-contained HTML page."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

import ember
import ember.trace
from ember.report import load, render, write_report
from ember.report.highlight import highlight
from ember.report.load import Trace
from ember.report.suggest import suggest


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


class Elements(HTMLParser):
    """Tags, ids and classes of a page; flags any resource fetched from elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.classes: list[str] = []
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.classes += (attrs.get("class") or "").split()
        for name in ("src", "href"):
            if (attrs.get(name) or "#").split(":")[0] in ("http", "https", "file", "//"):
                self.external.append(attrs[name])
        if tag == "link":
            self.external.append(str(attrs))


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trace")
    ember.reset()
    ember.config.trace_dir = str(directory)
    try:
        compiled = ember.compile(toy_example, backend="aot_eager")
        for sign in (1, -1):
            a, b = torch.randn(6), sign * torch.rand(6)
            torch.testing.assert_close(compiled(a, b), toy_example(a, b))
        a, b = torch.randn(7, dtype=torch.float64), torch.rand(7, dtype=torch.float64)
        torch.testing.assert_close(compiled(a, b), toy_example(a, b))  # a recompile
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
    return directory


def test_the_page_has_an_index_sections_and_marks(trace_dir):
    (trace,) = load(trace_dir)
    page = render([trace])
    elements = Elements()
    elements.feed(page)
    frames = len(trace.frames)
    assert frames >= 4  # toy_example twice (one recompile) and its resume functions
    assert elements.classes.count("frame-row") == frames
    assert elements.classes.count("frame") == frames
    assert {"p0-frame-index", "p0-stages", "p0-cache", "frame-filter"} <= elements.ids
    assert elements.classes.count("break-line") == 2  # the `if` line of both toy frames
    assert elements.classes.count("suggestion") == 2
    assert elements.classes.count("recompile") == 1
    assert "stage-chart" in elements.classes and "svg" in elements.tags
    assert elements.classes.count("graph-table") == len(trace.graphs)
    assert "guards" in elements.classes
    assert elements.external == []  # self-contained: no stylesheet, script or image links
    assert "<script>" in page and "<style>" in page


def test_the_break_line_is_the_if_statement(trace_dir):
    (trace,) = load(trace_dir)
    line = toy_example.__code__.co_firstlineno + 2
    page = render([trace])
    assert f'class="line break-line" data-line="{line}"' in page
    first = trace.frames[min(trace.frames)]
    assert first.breaks and first.breaks[0]["location"].endswith(f":{line}")


def test_command_line_writes_the_file(trace_dir, tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "ember.report", str(trace_dir), "-o", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out.resolve())
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_command_line_refuses_a_folder_without_traces(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ember.report", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "no *.jsonl trace files" in done.stderr


def test_a_truncated_trace_still_renders(trace_dir, tmp_path):
    (path,) = trace_dir.glob("*.jsonl")
    lines = path.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n" + lines[len(lines) // 2][:10])
    (trace,) = load(cut)
    assert trace.frames and "<!DOCTYPE html>" in render([trace])


@pytest.mark.parametrize(
    ("reason", "title"),
    [
        ("branch on a tensor's value (data-dependent control flow)", "Data-dependent branch"),
        ("Tensor.item() reads tensor data into Python", "Tensor value read into Python"),
        ("call to builtin print() (it has effects outside the graph)", "print() in compiled code"),
        (
            "call to getpid, a function implemented in C (its effects are not in the graph)",
            "Call the tracer cannot follow",
        ),
    ],
)
def test_suggestions_for_common_break_reasons(reason, title):
    assert suggest(reason).title == title


def test_suggestion_reasons_are_the_tracers_own():
    """The tracer's actual wording for a print and an .item() break gets a suggestion."""

    def f(x):
        y = x.sin()
        v = y.sum().item()
        return y * v

    (brk,) = ember.explain(f)(torch.randn(3)).breaks
    assert suggest(brk.reason) is not None


def test_highlighter_escapes_and_marks_tokens():
    out = highlight('if x < 1:  # "c"\n    s = "<b>"', "python")
    assert '<span class="tok-keyword">if</span>' in out
    assert '<span class="tok-comment"># &quot;c&quot;</span>' in out
    assert "<b>" not in out
    cpp = highlight("for (int64_t i = 0; i < n; ++i) { a[i] = 1.0f; } // done", "cpp")
    assert '<span class="tok-keyword">int64_t</span>' in cpp and "tok-comment" in cpp
    assert highlight("<x>", "unknown") == "&lt;x&gt;"


def test_trace_graph_rows_are_json(trace_dir):
    (path,) = trace_dir.glob("*.jsonl")
    tables = [json.loads(r["text"]) for r in map(json.loads, path.read_text().splitlines())
              if r["event"] == "blob" and r["kind"] == "graph_table"]  # fmt: skip
    assert tables and all(row[0] in ("placeholder", "call_function", "call_method", "call_module",
                                     "get_attr", "output") for t in tables for row in t)  # fmt: skip


def test_autotune_decisions_are_shown_with_their_timings(tmp_path, monkeypatch):
    """backend="autotune": the page lists each graph's candidates with their median times,
    the kept one and the evidence (issue 17: 'the report shows the timings')."""
    from ember.backends import autotune
    from ember.backends.autotune_timing import set_measure

    def measure(name, run):  # eager clearly fastest, so the choice is not the default
        run()
        return {"eager": 0.1, "aot_eager": 0.5, "inductor": 0.3}[name]

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    ember.reset()
    autotune.clear_decisions()
    set_measure(measure)
    ember.config.trace_dir = str(tmp_path / "trace")
    try:
        options = {"time_budget_s": 0.0, "warmup": 1, "min_runs": 5, "max_runs": 5}
        compiled = ember.compile(toy_example, backend="autotune", options=options)
        a, b = torch.randn(6), torch.rand(6)
        torch.testing.assert_close(compiled(a, b), toy_example(a, b))
    finally:
        ember.config.trace_dir = None
        set_measure(None)
        ember.reset()
    (trace,) = load(tmp_path / "trace")
    # two graphs: toy_example breaks at its data-dependent branch
    assert [d["choice"] for d in trace.autotune] == ["eager", "eager"]
    page = render([trace])
    parsed = Elements()
    parsed.feed(page)
    assert "autotune" in parsed.classes
    section = page[page.index('Backend choices (backend="autotune")') :]
    assert "<b>eager 100.000 ms (5 rounds)</b>" in section  # the kept one, fastest first
    assert section.index("eager 100.000") < section.index("inductor 300.000")
    assert "aot_eager 500.000 ms" in section and "eager vs inductor: faster in 5/5" in section
    assert 'href="#p0-frame-' in section


def _trace_with_breaks(sites: dict[str, list[int]]) -> Trace:
    """A trace whose frames broke at the given `file:line`s (site -> the frames that broke)."""
    trace = Trace(Path("made.jsonl"))
    for location, frames in sites.items():
        for fid in frames:
            trace.frame(fid).breaks.append({"location": location, "reason": f"why {location}"})
    return trace


def test_break_sites_are_distinct_and_counted_most_frequent_first():
    trace = _trace_with_breaks({"/a/m.py:9": [1], "/a/m.py:3": [1, 2, 3], "/a/n.py:4": [2, 5]})
    sites = trace.break_sites()
    assert [(s.location, s.count, s.frames) for s in sites] == [
        ("/a/m.py:3", 3, (1, 2, 3)),
        ("/a/n.py:4", 2, (2, 5)),
        ("/a/m.py:9", 1, (1,)),
    ]
    page = render([trace])
    top = page[page.index('id="break-sites"') :]
    assert page.index('id="break-sites"') < page.index('class="frame ')  # before the frames
    assert top.index("m.py:3") < top.index("n.py:4") < top.index("m.py:9")
    assert "3 sites, 6 breaks" in top


def test_the_toy_examples_two_breaks_are_one_site(trace_dir):
    (trace,) = load(trace_dir)
    line = toy_example.__code__.co_firstlineno + 2
    (site,) = trace.break_sites()
    assert site.location.endswith(f":{line}") and site.count == 2
    assert site.reason.startswith("branch on a tensor's value")


def test_compile_ids_number_codes_and_their_attempts():
    trace = Trace(Path("made.jsonl"))
    codes = {"f": ("/m.py", "f", 1), "resume_in_f_at_3": ("/m.py", "resume_in_f_at_3", 1)}
    for fid, name in enumerate(["f", "resume_in_f_at_3", "f", "resume_in_f_at_3", "f"], 1):
        file, qualname, line = codes[name]
        trace.frame(fid).code = {"file": file, "qualname": qualname, "line": line}
    trace.frame(3).recompile = "L['a'] dtype changed"
    groups = trace.compile_groups()
    assert [[f.compile_id for f in g] for g in groups] == [["0/0", "0/1", "0/2"], ["1/0", "1/1"]]
    html = render([trace])
    tree = html[html.index('id="p0-compile-tree"') :]
    assert tree.index("0/0") < tree.index("0/1") < tree.index("1/0")
    assert "recompiled: L[&#x27;a&#x27;] dtype changed" in tree


def test_the_compile_tree_holds_frames_compiles_graphs_and_kernels(trace_dir):
    (trace,) = load(trace_dir)
    ids = sorted(f.compile_id for f in trace.frames.values())
    # toy_example compiled twice (a recompile for float64); the resume function after the
    # `if` body twice, the one at the branch's other side once (the first call's b >= 0)
    assert ids == ["0/0", "0/1", "1/0", "1/1", "2/0"]
    parsed = Elements()
    parsed.feed(render([trace]))
    assert parsed.classes.count("tree-frame") == 3
    assert parsed.classes.count("tree-compile") == len(trace.frames)
    assert parsed.classes.count("tree-graph") == len(trace.graphs)


def scaled_step(a, b):
    """A graph break (data-dependent branch); compiled with dynamic=True, size symbols for
    a's two dimensions; reductions over each of them (kernels the scheduler cannot fuse)."""
    x = a.sum(0).sum() + a.sum(1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@pytest.fixture(scope="module")
def inductor_trace(tmp_path_factory):
    """scaled_step through the inductor backend on a cold cache, sizes 8, 9 and 10."""
    directory = tmp_path_factory.mktemp("inductor")
    saved = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(directory / "cache")
    ember.reset()
    ember.config.trace_dir = str(directory / "trace")
    try:
        compiled = ember.compile(scaled_step, dynamic=True)
        for n in (8, 9, 10):
            a, b = torch.randn(n, 3), -torch.rand(n)
            torch.testing.assert_close(compiled(a, b), scaled_step(a, b))
        assert ember.counters["inductor"]["forward_graphs"] == 2  # one per side of the break
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
        if saved is None:
            os.environ.pop("EMBER_CACHE_DIR", None)
        else:
            os.environ["EMBER_CACHE_DIR"] = saved
    return directory


def _nested(events: list[dict]) -> None:
    """Complete events of one thread: each lies within the one it starts in, or after it."""
    by_thread: dict = {}
    for ev in sorted(events, key=lambda ev: (ev["ts"], -ev["dur"])):
        by_thread.setdefault(ev["tid"], []).append(ev)
    for evs in by_thread.values():
        open_ends: list[int] = []
        for ev in evs:
            while open_ends and open_ends[-1] <= ev["ts"]:
                open_ends.pop()
            end = ev["ts"] + ev["dur"]
            assert not open_ends or end <= open_ends[-1], f"{ev} overlaps its parent"
            open_ends.append(end)


def test_the_timeline_is_chrome_trace_json_of_nested_stages(inductor_trace, tmp_path):
    page = write_report(inductor_trace / "trace", tmp_path / "report.html")
    (timeline,) = tmp_path.glob("report.*.trace.json")
    assert f'href="{timeline.name}"' in page.read_text()
    data = json.loads(timeline.read_text())
    events = [ev for ev in data["traceEvents"] if ev["ph"] == "X"]
    assert all(isinstance(ev["ts"], int) and ev["dur"] >= 0 and "pid" in ev and "tid" in ev
               for ev in events)  # fmt: skip
    names = {ev["name"] for ev in events}
    assert {"trace", "backend", "aot", "passes", "decompose", "lower", "schedule", "codegen",
            "cpp_build"} <= names  # fmt: skip
    assert any(ev["cat"] == "build" and ev["name"].startswith("build kernels") for ev in events)
    _nested(events)
    compiles = {ev["args"].get("compile_id") for ev in events if ev["name"] == "trace"}
    assert compiles == {"0/0", "1/0"}
    # a stage of the pipeline lies within its frame's trace span
    (lower, *_) = [ev for ev in events if ev["name"] == "lower"]
    trace = next(ev for ev in events if ev["name"] == "trace" and ev["tid"] == lower["tid"]
                 and ev["ts"] <= lower["ts"] <= ev["ts"] + ev["dur"])  # fmt: skip
    assert lower["ts"] + lower["dur"] <= trace["ts"] + trace["dur"]


def test_each_prim_graph_shows_its_loop_ir_and_fusion_decisions(inductor_trace):
    (trace,) = load(inductor_trace / "trace")
    prims = [g for g in trace.graphs.values() if g.stage.startswith("aot_")]
    assert len(prims) == 2
    for graph in prims:
        assert "# operations" in graph.loop_ir and "# outputs" in graph.loop_ir
        assert re.match(r"k0_\w+: loops \[", graph.kernel_groups)
    first = min(prims, key=lambda g: g.id)  # reductions over either dimension of a
    assert any(line.startswith("fuse ") for line in first.fusion), first.fusion
    assert any(line.startswith("no fusion of ") and ": " in line for line in first.fusion)
    page = render([trace])
    parsed = Elements()
    parsed.feed(page)
    assert parsed.classes.count("loop-ir") == parsed.classes.count("fusion") == 2
    assert "<td>fused</td>" in page and "<td>not fused</td>" in page


def test_fusion_lines_are_captured_without_reaching_other_handlers(tmp_path, caplog):
    """With no EMBER_LOGS listener the scheduler's INFO lines go to the trace only."""
    from ember.trace.kernels import FUSION_LOG, captured_log

    logger = logging.getLogger(FUSION_LOG)
    before = (logger.level, logger.propagate)
    ember.config.trace_dir = str(tmp_path)
    ember.trace.configure()
    try:
        with caplog.at_level(logging.WARNING), captured_log(FUSION_LOG) as lines:
            logging.getLogger(FUSION_LOG).info("fuse %s into %s", "a", "b")
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
    assert lines == ["fuse a into b"] and not caplog.records
    assert (logger.level, logger.propagate) == before


def test_dynamic_sizes_are_listed_with_their_sources_and_guards(inductor_trace):
    (trace,) = load(inductor_trace / "trace")
    first = trace.frames[min(trace.frames)]
    by_name = {s["symbol"]: s for s in first.symbols}
    assert set(by_name) == {"s0", "s1"}  # a's two dimensions (b's is the same as a's first)
    assert by_name["s0"]["sources"][0] == "L['a'].size()[0]" and by_name["s0"]["value"] == "8"
    assert by_name["s1"]["sources"][0] == "L['a'].size()[1]" and by_name["s1"]["value"] == "3"
    s0_guards = [g["text"] for g in first.symbol_guards("s0")]
    assert "s0 >= 2" in s0_guards and any("L['b'].size()[0]" in g for g in s0_guards)
    assert all("s0" not in g["text"] for g in first.symbol_guards("s1"))
    page = render([trace])
    parsed = Elements()
    parsed.feed(page)
    assert parsed.classes.count("symbols") == 2 * len([f for f in trace.frames.values()
                                                       if f.symbols])  # fmt: skip
    assert "Dynamic sizes (2 symbols)" in page and "L[&#x27;a&#x27;].size()[1]" in page


def _run_traced(trace: Path | None, cache: Path, dynamic: bool) -> subprocess.CompletedProcess:
    script = WARM_RUN.format(tests=str(Path(__file__).parent), trace=trace and str(trace),
                             dynamic=dynamic)  # fmt: skip
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


WARM_RUN = """
import sys, torch, ember, ember.trace
sys.path.insert(0, {tests!r})
from test_report import scaled_step
if {trace!r} is not None:
    ember.config.trace_dir = {trace!r}
compiled = ember.compile(scaled_step, dynamic={dynamic})
for n in (8, 9, 10):
    a, b = torch.randn(n, 3), -torch.rand(n)
    torch.testing.assert_close(compiled(a, b), scaled_step(a, b))
if {trace!r} is not None:
    ember.trace.close()
print(dict(ember.counters["inductor"]))
"""


def test_a_warm_start_still_shows_fusion_aot_graphs_and_loop_ir(inductor_trace, tmp_path):
    """A second process, its code from the artifact cache the first one filled: the kernels'
    fused nodes, the aot graphs and their loop IR are on the page as on a cold compile."""
    done = _run_traced(tmp_path / "trace", inductor_trace / "cache", dynamic=True)
    assert "'codegen_cache_hits': 2" in done.stdout and "codegen_cache_misses" not in done.stdout
    (cold,) = load(inductor_trace / "trace")
    (warm,) = load(tmp_path / "trace")

    def shown(trace):
        prims = sorted((g for g in trace.graphs.values() if g.stage.startswith("aot_")),
                       key=lambda g: g.id)  # fmt: skip
        return [(g.stage, {k["name"]: k["fused_nodes"] for k in g.kernels}, g.kernel_groups,
                 bool(g.loop_ir), bool(g.fusion)) for g in prims]  # fmt: skip

    assert shown(warm) == shown(cold)
    assert all(k["fused_nodes"] for g in warm.graphs.values() for k in g.kernels)
    assert "fuses: —" not in render([warm])


def test_a_warm_start_after_an_untraced_cold_compile_shows_loop_ir_and_fusion(tmp_path):
    """The cold process wrote no trace; the loop IR and fusion decisions were kept with the
    cached code anyway, so the traced warm process shows them."""
    _run_traced(None, tmp_path / "cache", dynamic=True)
    done = _run_traced(tmp_path / "warm", tmp_path / "cache", dynamic=True)
    assert "codegen_cache_misses" not in done.stdout
    (warm,) = load(tmp_path / "warm")
    prims = [g for g in warm.graphs.values() if g.stage.startswith("aot_")]
    assert prims and all(g.loop_ir and g.kernel_groups and g.fusion for g in prims)
    page = render([warm])
    assert 'class="loop-ir"' in page and "Fusion decisions (" in page


def test_a_warm_start_from_the_aot_cache_records_its_aot_graphs(tmp_path):
    """Static sizes: the warm process finds the prim graphs in the aot artifact cache (no
    aot trace at all); they are rebuilt from their stored source for the trace."""
    _run_traced(tmp_path / "cold", tmp_path / "cache", dynamic=False)
    done = _run_traced(tmp_path / "warm", tmp_path / "cache", dynamic=False)
    assert "'cache_hits': 6" in done.stdout  # the aot level: 2 graphs for each of 3 sizes
    (warm,) = load(tmp_path / "warm")
    prims = [g for g in warm.graphs.values() if g.stage.startswith("aot_")]
    assert len(prims) == 6 and all(g.parent is not None and g.rows for g in prims)
    assert all(k["fused_nodes"] for g in prims for k in g.kernels)
    assert all(g.loop_ir and g.kernel_groups for g in prims)
