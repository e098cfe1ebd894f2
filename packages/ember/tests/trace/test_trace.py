"""EMBER_TRACE_DIR / ember.config.trace_dir: the structured JSON-lines trace."""

from __future__ import annotations

import json
import logging
import os

import pytest
import torch

import ember
import ember.trace
from ember.trace.writer import BLOB_MIN


@pytest.fixture(scope="module")
def recs(tmp_path_factory) -> list[dict]:
    """The trace of run_program(), written once for the module's tests."""
    directory = tmp_path_factory.mktemp("trace")
    cache = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))  # a cold compile
    ember.reset()
    ember.config.trace_dir = str(directory)
    try:
        run_program()
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
        if cache is None:
            del os.environ["EMBER_CACHE_DIR"]
        else:
            os.environ["EMBER_CACHE_DIR"] = cache
    return records(directory)


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def captured(x):  # a break inside a try/finally block: the frame runs eagerly
    y = x + 1
    try:
        if x.sum() > 0:
            return y * 2
    finally:
        y = y - 1
    return y


def records(directory) -> list[dict]:
    (path,) = directory.glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_program() -> None:
    compiled = ember.compile(toy_example)
    a, b = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(compiled(a, b), toy_example(a, b))
    torch.testing.assert_close(compiled(a, -b.abs()), toy_example(a, -b.abs()))
    a, b = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    torch.testing.assert_close(compiled(a, b), toy_example(a, b))  # a recompile
    x = torch.randn(5)
    torch.testing.assert_close(ember.compile(captured)(x), captured(x))


def test_every_event_kind_of_a_program_with_a_break_and_a_recompile(recs):
    kinds = {r["event"] for r in recs}
    assert kinds >= {"process", "blob", "frame", "bytecode", "graph", "guards", "graph_break",
                     "recompile", "stage", "kernels", "cache", "fallback"}  # fmt: skip
    assert sum(len(r["kernels"]) for r in recs if r["event"] == "kernels") >= 4
    stages = {r["name"] for r in recs if r["event"] == "stage"}
    assert stages >= {"trace", "aot", "decompose", "lower", "schedule", "codegen", "cpp_build"}
    assert {r["stage"] for r in recs if r["event"] == "graph"} >= {"torch", "aot_inference"}
    frames = [r for r in recs if r["event"] == "frame"]
    assert frames[0]["code"]["name"] == "toy_example"
    assert all(f["code"]["file"] == __file__ for f in frames)
    (brk, *_) = [r for r in recs if r["event"] == "graph_break"]
    assert brk["location"] == f"{__file__}:{toy_example.__code__.co_firstlineno + 2}"
    assert "data-dependent" in brk["reason"] and brk["user_stack"]
    (recompile,) = [r for r in recs if r["event"] == "recompile"]
    assert "float64" in recompile["reason"] or "dtype" in recompile["reason"]
    guards = next(r for r in recs if r["event"] == "guards")
    assert any(g["where"].startswith(f"{__file__}:") for g in guards["guards"])
    kernels = next(r for r in recs if r["event"] == "kernels")
    assert kernels["kernels"] and all(k["fused_nodes"] for k in kernels["kernels"])
    eager = {r["code"]["name"]: r["reason"] for r in recs if r.get("kind") == "eager_frame"}
    assert "try/with" in eager["captured"]


def test_no_payload_is_written_twice(recs):
    blobs = [r for r in recs if r["event"] == "blob"]
    assert len({b["id"] for b in blobs}) == len(blobs)
    assert len({b["text"] for b in blobs}) == len(blobs)
    graph_ids = [r["id"] for r in recs if r["event"] == "graph"]
    assert len(set(graph_ids)) == len(graph_ids)
    known = {b["id"] for b in blobs}

    def check(value):  # every long text is a blob reference, and the blob came first
        if isinstance(value, str):
            assert len(value) < BLOB_MIN
        elif isinstance(value, dict):
            if set(value) == {"blob"}:
                assert value["blob"] in known
            for v in value.values():
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)

    for r in recs:
        if r["event"] != "blob":
            check(r)
    # the source file of every frame (resume functions share it) is stored once
    files = [r["code"]["file_text"]["blob"] for r in recs if r["event"] == "frame"]
    assert len(set(files)) == 1 and len(files) > 1


def test_stage_times_are_exclusive_and_per_graph(recs):
    graphs = {r["id"] for r in recs if r["event"] == "graph" and r["stage"] == "torch"}
    per_graph = [r for r in recs if r["event"] == "stage" and r["graph"] is not None]
    assert {r["graph"] for r in per_graph} == graphs
    assert all(r["seconds"] >= 0 for r in recs if r["event"] == "stage")
    total = sum(r["seconds"] for r in recs if r["event"] == "stage")
    assert total <= recs[-1]["t"] + 1e-3  # exclusive times never add up past the wall clock


def test_off_by_default_installs_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBER_TRACE_DIR", raising=False)
    compiled = ember.compile(toy_example, backend="eager")
    compiled(torch.randn(4), torch.randn(4))
    assert ember.trace.active() is None
    assert logging.getLogger("ember.events").level == logging.NOTSET
    assert not ember.trace.hooks.on()
    assert not list(tmp_path.iterdir())


def test_env_variable_turns_it_on(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_TRACE_DIR", str(tmp_path))
    try:
        ember.compile(toy_example, backend="eager")(torch.randn(4), torch.randn(4))
    finally:
        ember.trace.close()
    recs = records(tmp_path)
    assert recs[0]["event"] == "process"
    assert {"frame", "graph_break"} <= {r["event"] for r in recs}


def test_a_recording_failure_never_fails_the_compile(tmp_path, monkeypatch, caplog):
    def broken(gm):
        raise RuntimeError("cannot describe")

    monkeypatch.setattr("ember.trace.writer.graph_rows", broken)
    ember.config.trace_dir = str(tmp_path)
    try:
        compiled = ember.compile(toy_example, backend="eager")
        a, b = torch.randn(4), torch.randn(4)
        torch.testing.assert_close(compiled(a, b), toy_example(a, b))
    finally:
        ember.config.trace_dir = None
        ember.trace.close()
    warnings = [r for r in caplog.records if r.name == "ember.trace"]
    assert len(warnings) == 1 and "could not record" in warnings[0].getMessage()
    assert any(r["event"] == "frame" for r in records(tmp_path))  # the rest was recorded
