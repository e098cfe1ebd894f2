"""The conformance runner's classifier and report, on made-up pytest tracebacks.

pytest -q -p no:cacheprovider conformance/tests
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import run


def traceback(test_lines: list[str], inner: list[str], inner_file: str, error: str) -> str:
    """A pytest --tb=long text: the test's entry, then one inner entry that raised."""
    sep = "_ " * 20
    return "\n".join(
        [
            "    def test_it(self):",
            *test_lines,
            "",
            "test/dynamo/test_x.py:10: ",
            sep,
            "",
            *inner,
            *(f"E       {line}" for line in error.splitlines()),
            "",
            f"{inner_file}:99: {error.split(':')[0]}",
        ]
    )


ASSERT_EQUAL = "/venv/lib/python3.11/site-packages/torch/_dynamo/test_case.py"

CASES = [
    ("wrong_result", ["        x = f(1)", ">       self.assertEqual(opt(x), fn(x))"],
     ASSERT_EQUAL, "AssertionError: Tensor-likes are not close!"),
    ("count", [">       self.assertEqual(cnt.frame_count, 1)"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    # a recording backend's graph list, read through an attribute: a count, not a value
    ("count", [">       self.assertEqual(len(eager.graphs), 2)"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    ("dynamo_internals",
     ["    @torch._dynamo.config.patch(automatic_dynamic_shapes=False)",
      ">       self.assertEqual(cnt.frame_count, 1)"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    ("dynamo_internals", ['>       self.assertEqual(counters["stats"]["calls"], 1)'],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    ("crash", [">       opt(torch.ones(2))"],
     "/repo/packages/codegen_triton_cpp/src/ember_codegen/wrapper.py",
     "ValueError: too many values to unpack"),
    ("refused", [">       opt(torch.ones(2))"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/translator.py",
     "ember_bytecode_tracer.exc.Unsupported: graph break under fullgraph=True: x.item()"),
    ("dynamo_internals",
     ["        with self.assertRaises(torch._dynamo.exc.Unsupported):",
      ">           opt(torch.ones(2))"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/translator.py",
     "ember_bytecode_tracer.exc.Unsupported: graph break under fullgraph=True"),
    ("other", [">       opt(torch.ones(2))"], "/usr/lib/python3.11/json/decoder.py",
     "KeyError: 'k'"),
    # a backend of the test's that looks for Dynamo's placeholder names: not Ember's failure
    ("dynamo_internals",
     ["        def check(gm, _):", "            found = [n for n in gm.graph.nodes",
      "                     if n.name == \"l_w_\"]", "            assert found",
      ">       opt(torch.ones(2))"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/output_graph.py",
     "ember_bytecode_tracer.exc.BackendCompilerFailed: backend 'check' failed"),
    # a failing backend the test means to skip, caught as Dynamo's exception type
    ("dynamo_internals",
     ["        try:", ">           opt(torch.ones(2))",
      "        except torch._dynamo.exc.BackendCompilerFailed:", "            pass"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/output_graph.py",
     "ember_bytecode_tracer.exc.BackendCompilerFailed: backend 'x' failed: ImportError"),
    # Dynamo's own cache through its debug API: not Ember's cache
    ("dynamo_internals",
     ["        opt(torch.ones(2))", "        entries = _debug_get_cache_entry_list(fn.__code__)",
      ">       self.assertEqual(len(entries), 1)"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    # the value is right; only Dynamo's graph keeps a sym_max node on static sizes
    ("dynamo_internals",
     ["        nodes = [n for n in graph.graph.nodes if n.target is torch.sym_max]",
      ">       self.assertEqual(len(nodes), 1)"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    # a value assertion on a sym_max result stays a wrong result
    ("wrong_result", ["        out = opt(x)", ">       self.assertEqual(out, torch.sym_max(2, 3))"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
    # Dynamo's metrics of a backend failure a Dynamo knob silences
    ("dynamo_internals",
     ['        with unittest.mock.patch("torch._dynamo.config.suppress_errors", True):',
      "            torch._dynamo.utils.clear_compilation_metrics()",
      ">           f(x)"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/output_graph.py",
     "ember_bytecode_tracer.exc.BackendCompilerFailed: backend 'b' failed: RuntimeError"),
    # ... while a backend failure with no such knob stays a crash
    ("crash", ["            torch._dynamo.utils.clear_compilation_metrics()", ">           f(x)"],
     "/repo/packages/bytecode_tracer/src/ember_bytecode_tracer/output_graph.py",
     "ember_bytecode_tracer.exc.BackendCompilerFailed: backend 'b' failed: RuntimeError"),
    # a deviation from NumPy the test itself marks as torch.compile's
    ("dynamo_internals",
     ["        y = fn(x)", ">       self.assertTrue(y.flags.writeable)  # XXX: differs from numpy"],
     ASSERT_EQUAL, "AssertionError: False is not true"),
    # the stale id() a filtered-out ID_MATCH guard lets Dynamo reuse
    ("dynamo_internals",
     ["        def guard_filter_fn(entries):", "            return [False for e in entries]",
      "        def fn(x):", "            return id(x)",
      ">       self.assertEqual(fn(y), id(x))"],
     ASSERT_EQUAL, "AssertionError: Scalars are not equal!"),
]  # fmt: skip


@pytest.mark.parametrize(("expected", "test_lines", "inner_file", "error"), CASES)
def test_classify(expected: str, test_lines: list[str], inner_file: str, error: str) -> None:
    text = traceback(test_lines, ["    def helper():", ">       raise"], inner_file, error)
    cls, why = run.classify(text, "test_x.py")
    assert cls == expected, why


def test_every_rule_names_a_known_class() -> None:
    assert {rule.cls for rule in run.RULES} <= set(run.CLASSES)
    fields = {"error", "innermost", "where", "body", "method"}
    assert all(set(rule.patterns) <= fields for rule in run.RULES)


def test_compare_counts_only_tests_torch_passes() -> None:
    def junit(outcome: str, message: str = "") -> dict:
        return {"outcome": outcome, "message": message, "text": ""}

    torch_tests = {"A::a": junit("passed"), "A::b": junit("failed"), "A::c": junit("passed")}
    ember_tests = {
        "A::a": junit("passed"),
        "A::b": junit("passed"),
        "A::c": junit("failed", "boom"),
    }
    rows = run.compare(torch_tests, ember_tests, "test_x.py")
    summary = run.summarize(rows)
    assert (summary["tests"], summary["torch_passes"], summary["ember_passes"]) == (3, 2, 1)
    assert summary["ember_only_passes"] == 1
    assert rows["A::c"]["class"] == "other" and rows["A::c"]["message"] == "boom"
    assert "class" not in rows["A::b"]


def test_read_junit_outcomes(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="pkg.test_x.T" name="test_ok" time="0.1"/>'
        '<testcase classname="pkg.test_x.T" name="test_bad"><failure message="m">tb</failure>'
        "</testcase>"
        '<testcase classname="pkg.test_x.T" name="test_xf">'
        '<skipped type="pytest.xfail" message="expected"/></testcase>'
        "</testsuite></testsuites>"
    )
    tests = run.read_junit(xml)
    assert {k: v["outcome"] for k, v in tests.items()} == {
        "T::test_ok": "passed", "T::test_bad": "failed", "T::test_xf": "xfail",
    }  # fmt: skip
    assert tests["T::test_bad"]["text"] == "tb"


def test_write_doc_replaces_only_the_marked_block(tmp_path: Path, monkeypatch) -> None:
    doc = tmp_path / "conformance.md"
    doc.write_text(f"intro\n{run.BEGIN}\nold\n{run.END}\noutro\n")
    monkeypatch.setattr(run, "DOC", doc)
    run.write_doc("new table")
    assert doc.read_text() == f"intro\n{run.BEGIN}\nnew table\n{run.END}\noutro\n"


def test_messages_lose_this_machines_folders() -> None:
    message = f"failed (graph from {run.ROOT}/conformance/upstream/test/dynamo/test_x.py:2)"
    assert run.local_paths_out(message) == "failed (graph from test/dynamo/test_x.py:2)"
    inner = "/opt/venv/lib/python3.11/site-packages/torch/_dynamo/utils.py:3"
    assert run.local_paths_out(inner) == "torch/_dynamo/utils.py:3"


def test_selection_joins_the_files_and_the_commands_k() -> None:
    inductor = {"path": "test/inductor/test_torchinductor.py", "pytest_k": "CpuTests"}
    assert run.selection(inductor, None) == "(CpuTests)"
    assert run.selection(inductor, "test_abs") == "(CpuTests) and (test_abs)"
    assert run.selection({"path": "test/dynamo/test_exc.py"}, None) is None
    cmd = run.pytest_command(Path("t.py"), "ember", Path("j.xml"), "(CpuTests)")
    assert cmd[cmd.index("-k") + 1] == "(CpuTests)"
    # the compat plugin loads in both runs, the redirect only in Ember's
    assert "upstream_compat" in run.pytest_command(Path("t.py"), "torch", Path("j.xml"))
    assert "ember_redirect" not in run.pytest_command(Path("t.py"), "torch", Path("j.xml"))


def shard_result(shard: str, rows: dict[str, dict], date: str = "2026-11-29") -> dict:
    return {"file": "test/dynamo/test_x.py", "commit": "c" * 40, "shard": shard, "date": date,
            "command": f"python conformance/run.py --files test_x.py --shard {shard}",
            "runs": {"torch": {"timed_out": False}, "ember": {"timed_out": False}},
            "tests": rows, "summary": run.summarize(rows)}  # fmt: skip


def test_a_files_shards_merge_into_one_result(tmp_path: Path, monkeypatch) -> None:
    import json
    import os

    monkeypatch.setattr(run, "RESULTS", tmp_path)
    passed = {"torch": "passed", "ember": "passed"}
    refused = {"torch": "passed", "ember": "failed", "class": "refused"}
    (tmp_path / "test_x.shard-1-of-2.json").write_text(
        json.dumps(shard_result("1/2", {"a": passed, "b": refused}))
    )
    first = run.file_result("test_x")
    assert first["shards"] == "1 of 2 shards" and first["summary"]["torch_passes"] == 2
    (tmp_path / "test_x.shard-2-of-2.json").write_text(
        json.dumps(shard_result("2/2", {"c": passed}, date="2026-11-30"))
    )
    merged = run.file_result("test_x")
    assert merged["shards"] is None and merged["date"] == "2026-11-30"
    assert merged["summary"]["ember_passes"] == 2 and merged["summary"]["by_class"]["refused"] == 1
    assert "--shard K/2" in merged["command"]
    # a whole-file run written after the shards is the latest measurement
    whole = tmp_path / "test_x.json"
    whole.write_text(json.dumps(shard_result("1/1", {"a": passed}) | {"shard": None}))
    later = max(p.stat().st_mtime for p in tmp_path.glob("*shard*")) + 5
    os.utime(whole, (later, later))
    assert run.file_result("test_x")["summary"]["tests"] == 1


def test_the_limits_plugin_keeps_one_interleaved_shard(monkeypatch) -> None:
    import run_limits

    class Hook:
        def pytest_deselected(self, items: list) -> None:
            self.dropped = items

    class Config:
        hook = Hook()

    items = list(range(7))
    monkeypatch.setenv("EMBER_CONFORMANCE_SHARD", "2/3")
    run_limits.pytest_collection_modifyitems(Config(), items)
    assert items == [1, 4] and Config.hook.dropped == [0, 2, 3, 5, 6]
    with pytest.raises(ValueError, match="K/N"):
        run_limits.shard_of("4/3")


def test_a_failing_line_in_a_part_the_test_file_mixes_in_is_the_tests_own() -> None:
    assert run.in_test_file("test/dynamo/_test_misc_part3.py", "test_misc.py")
    assert run.in_test_file("/x/test/dynamo/test_misc.py", "test_misc.py")
    assert not run.in_test_file("torch/_dynamo/test_case.py", "test_misc.py")
    assert not run.in_test_file("test/dynamo/_test_miscellany.py", "test_misc.py")
