"""The compile report (ember.trace + ember.report) of real programs, rendered in headless
Chromium: the TorchDynamo README's toy_example (graph breaks, a recompile) and a tiny HF
GPT-2 through the inductor backend (graphs, kernels). The page's DOM after its script ran
(`--dump-dom`) is checked for its structure, and a screenshot is taken and its size checked.

Chromium: `apt-get install -y --no-install-recommends chromium-headless-shell` (or
`chromium`); EMBER_CHROMIUM names another binary. Without one these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

import ember
import ember.trace
from ember.report import load, write_report

WINDOW = (1280, 2000)


def chromium() -> str | None:
    names = [os.environ.get("EMBER_CHROMIUM", ""), "chromium-headless-shell", "chromium",
             "chromium-browser", "google-chrome", "headless_shell"]  # fmt: skip
    return next((shutil.which(n) for n in names if n and shutil.which(n)), None)


needs_chromium = pytest.mark.skipif(
    chromium() is None,
    reason="headless Chromium not found: apt-get install -y --no-install-recommends "
    "chromium-headless-shell (or set EMBER_CHROMIUM) to check the report in a browser",
)


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-dev-shm-usage", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               "--user-data-dir=" + str(page.parent / "chromium-profile"), *flags,
               page.resolve().as_uri()]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.classes: list[str] = []
        self.tags: list[str] = []
        self.body: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "body":
            self.body = attrs
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.classes += (attrs.get("class") or "").split()


def dump_dom(page: Path) -> Dom:
    done = browse(page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    assert dom.body.get("data-ready") == "yes", "the report's script did not run"
    return dom


def screenshot(page: Path) -> Path:
    shot = page.with_suffix(".png")
    done = browse(page, f"--screenshot={shot}")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == WINDOW
    assert len(data) > 30_000, "the screenshot looks blank"
    return shot


def traced(directory: Path, run) -> Path:
    ember.reset()
    ember.config.trace_dir = str(directory / "trace")
    try:
        run()
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
    return write_report(directory / "trace", directory / "report.html")


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def run_toy_example() -> None:
    compiled = ember.compile(toy_example)
    for sign in (1, -1):
        a, b = torch.randn(10), sign * torch.rand(10)
        torch.testing.assert_close(compiled(a, b), toy_example(a, b))
    a, b = torch.randn(10, dtype=torch.float64), torch.rand(10, dtype=torch.float64)
    torch.testing.assert_close(compiled(a, b), toy_example(a, b))  # recompiles


@needs_chromium
def test_toy_example_report_in_chromium(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))  # a cold compile: every stage
    page = traced(tmp_path, run_toy_example)
    (trace,) = load(tmp_path / "trace")
    dom = dump_dom(page)
    frames = len(trace.frames)
    assert frames == 5  # toy_example x2 (a recompile), its resume functions x3
    assert {"summary", "p0-frame-index", "p0-stages", "p0-cache", "p0-frame-1"} <= dom.ids
    assert dom.classes.count("frame-row") == frames == dom.classes.count("frame")
    assert dom.classes.count("break-line") == 2  # the `if` of both toy_example frames
    assert dom.classes.count("suggestion") == 2
    assert dom.classes.count("recompiled") == 1
    assert dom.classes.count("kernel") >= 5  # every graph compiled to C++ kernels
    assert dom.classes.count("bar") >= 6  # trace, aot, decompose, lower, schedule, codegen...
    assert "svg" in dom.tags and "tok-keyword" in dom.classes
    screenshot(page)


def run_tiny_gpt2() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100,
                                     bos_token_id=0, eos_token_id=0)  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    compiled = ember.compile(model)
    with torch.no_grad():
        got, expected = compiled(input_ids=ids).logits, model(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@needs_chromium
def test_tiny_hf_model_report_in_chromium(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    page = traced(tmp_path, run_tiny_gpt2)
    (trace,) = load(tmp_path / "trace")
    torch_graphs = [g for g in trace.graphs.values() if g.stage == "torch"]
    assert len(torch_graphs) == 1 and not any(f.breaks for f in trace.frames.values())
    kernels = sum(len(g.kernels) for g in trace.graphs.values())
    assert kernels > 5
    dom = dump_dom(page)
    assert dom.classes.count("frame-row") == len(trace.frames)
    assert dom.classes.count("graph-table") == len(trace.graphs)  # torch + aot graphs
    assert dom.classes.count("kernel") == kernels
    assert "per-graph" in dom.classes and "guards" in dom.classes
    screenshot(page)


def step(a, b):
    x = a.sum(0).sum() + a.sum(1)
    if b.sum() < 0:  # a graph break
        b = b * -1
    return x * b


def run_dynamic_step() -> None:
    compiled = ember.compile(step, dynamic=True)
    for n in (8, 9, 10):
        a, b = torch.randn(n, 3), (-1) ** n * torch.rand(n)
        torch.testing.assert_close(compiled(a, b), step(a, b))
    a, b = torch.randn(5, 3, dtype=torch.float64), torch.rand(5, dtype=torch.float64)
    torch.testing.assert_close(compiled(a, b), step(a, b))  # recompiles: breaks there again


@needs_chromium
def test_report_sections_beyond_the_frames_in_chromium(tmp_path, monkeypatch):
    """A graph break and dynamic sizes through inductor, cold: distinct break sites first,
    the compile-id tree, the timeline (Chrome trace JSON, linked), loop IR and fusion
    decisions per graph, the size symbols with their sources and guards."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    page = traced(tmp_path, run_dynamic_step)
    (trace,) = load(tmp_path / "trace")
    assert [s.count for s in trace.break_sites()] == [2]  # one site, broken at in 2 compiles
    assert sorted(f.compile_id for f in trace.frames.values())[:2] == ["0/0", "0/1"]
    dom = dump_dom(page)
    assert {"break-sites", "p0-compile-tree", "p0-timeline"} <= dom.ids
    html = page.read_text()
    assert html.index('id="break-sites"') < html.index('class="frame ')
    prims = [g for g in trace.graphs.values() if g.stage.startswith("aot_")]
    assert dom.classes.count("tree-compile") == len(trace.frames)
    assert dom.classes.count("loop-ir") == dom.classes.count("fusion") == len(prims) >= 3
    assert "fusion-decisions" in dom.classes and dom.classes.count("symbols") >= 2
    (timeline,) = tmp_path.glob("report.*.trace.json")
    events = json.loads(timeline.read_text())["traceEvents"]
    assert {"trace", "aot", "lower", "schedule", "codegen", "cpp_build"} <= {
        ev["name"] for ev in events if ev["ph"] == "X"
    }
    screenshot(page)
