"""The public-suite runner (benchmarks/suites) at its CPU size: a few small models per suite,
fp32 inference, eager and Ember. Each must match eager at the suite's tolerance, in one
graph, and get a speedup figure from the interleaved rounds. timm and torchvision models
skip where those libraries are not installed (the integration session installs neither:
the registry's torchvision is a CUDA build); the `vision` nox session runs them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

SUITES = Path(__file__).resolve().parents[1] / "benchmarks" / "suites"
sys.path.insert(0, str(SUITES))

import run as suites_run  # noqa: E402

# timm's blocks assert shapes with torch._assert (efficientnet, ViT's patch embedding): a
# regression there once broke efficientnet_b0 into 38 graphs; the vision ones run in the
# `vision` nox session, where timm and torchvision are installed
CASES = [
    ("huggingface", "BertForMaskedLM"),
    ("huggingface", "GPT2LMHeadModel"),
    ("timm", "lcnet_050"),
    ("timm", "efficientnet_b0"),
    ("timm", "vit_tiny_patch16_224"),
    ("torchvision", "squeezenet1_1"),
    ("torchvision", "mobilenet_v2"),
]


def _args(suite: str, tmp_path: Path) -> object:
    return suites_run.parse_args(
        ["--suite", suite, "--compilers", "eager,ember", "--rounds", "1", "--warmup", "0",
         "--min-sample-ms", "1", "--out", str(tmp_path / "out.jsonl")]
    )  # fmt: skip


@pytest.mark.parametrize(("suite", "model"), CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_suite_model_passes_in_one_graph(suite: str, model: str, tmp_path: Path) -> None:
    record = suites_run.run_one(suite, model, _args(suite, tmp_path))
    if "skipped" in record:
        pytest.skip(record["skipped"])
    assert "error" not in record, record
    ember = record["compilers"]["ember"]
    assert ember.get("error") is None, ember
    assert ember["passes"] is True and record["compilers"]["eager"]["passes"] is True
    assert ember["graphs"] == 1
    assert ember["launches"] > 0  # the kernels one steady call launches
    assert ember["speedup"] > 0 and ember["compile_s"] >= 0
    assert ember["peak_mb"] > 0 and record["compilers"]["eager"]["peak_mb"] > 0


def test_cpu_peak_counts_what_a_call_holds_at_once() -> None:
    x = torch.randn(1024, 1024)  # 4 MiB

    def step():
        a = x * 2
        b = a + 1
        del a
        c = b * 3  # b and c live: 8 MiB at most, a freed before c
        return c.sum()

    def scoped():  # the same inside one profiled scope (an optimizer's step is one)
        with torch.profiler.record_function("scope"):
            return step()

    assert abs(suites_run._cpu_peak_bytes(step) - 8 * 2**20) < 2**12
    assert abs(suites_run._cpu_peak_bytes(scoped) - 8 * 2**20) < 2**12


def test_a_bf16_miss_passes_only_as_close_to_float64_as_eager() -> None:
    torch.manual_seed(0)
    exact = torch.randn(1000, dtype=torch.float64)
    eager = exact + 0.01 * torch.randn(1000, dtype=torch.float64)  # eager's own bf16 error
    like_eager = exact + 0.02 * torch.randn(1000, dtype=torch.float64)
    worse = exact + 0.2 * torch.randn(1000, dtype=torch.float64)
    ok, ratio = suites_run.fp64_check([like_eager], [eager], [exact], atol=4e-2)
    assert ok and 1.5 < ratio < 2.5, ratio
    ok, ratio = suites_run.fp64_check([worse], [eager], [exact], atol=4e-2)
    assert not ok and ratio > 15, ratio
    assert suites_run.fp64_check([worse[:10]], [eager], [exact], atol=4e-2)[0] is False


def test_unknown_model_is_reported_not_fatal(tmp_path: Path) -> None:
    args = _args("huggingface", tmp_path)
    record = suites_run.run_one("huggingface", "NoSuchModelForMaskedLM", args)
    assert "has no NoSuchModelForMaskedLM" in record["skipped"]


def test_compile_lanes_report_the_cold_compile_and_time_from_warm_caches(tmp_path: Path) -> None:
    # the cold pass and the timed pass share the run's disk caches: the timed first call
    # loads what the cold one built, and the record's compile figures are the cold pass's
    out = tmp_path / "out.jsonl"
    suites_run.main(
        ["--suite", "huggingface", "--models", "BertForMaskedLM", "--compile-lanes", "2",
         "--compilers", "eager,ember", "--rounds", "1", "--warmup", "0", "--min-sample-ms",
         "1", "--out", str(out)]
    )  # fmt: skip
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    ember = record["compilers"]["ember"]
    assert record["compile_lanes"] == 2 and ember["passes"] is True, record
    assert ember["cache"].get("cache_hits", 0) > 0 and not ember["cache"].get("cache_misses")
    assert ember["first_call_s"] > 0 and ember["warm_first_call_s"] > 0, ember
    assert ember["compile_s"] == pytest.approx(ember["first_call_s"] - ember["median_ms"] / 1e3)


def test_a_compiler_without_a_cold_first_call_has_no_compile_figure() -> None:
    record = {"compilers": {"eager": {"first_call_s": 0.1, "compile_s": 0.0, "median_ms": 10.0},
                            "ember": {"first_call_s": 0.5, "compile_s": 0.49, "median_ms": 10.0}}}  # fmt: skip
    cold = {"compilers": {"eager": {"first_call_s": 0.3}, "ember": {"error": "boom"}}}
    suites_run.take_cold_compiles(record, cold, 4)
    eager, ember = record["compilers"]["eager"], record["compilers"]["ember"]
    assert eager["first_call_s"] == 0.3 and eager["compile_s"] == pytest.approx(0.29)
    assert eager["warm_first_call_s"] == 0.1
    assert "compile_s" not in ember and ember["warm_compile_s"] == 0.49


def test_each_compilers_cold_compile_has_its_own_process_and_time(monkeypatch) -> None:
    # a torch.compile that runs out of time leaves Ember's cold compile its own budget
    import argparse

    def spawn(command, env, args, name):
        compiler = command[command.index("--compilers") + 1].split(",")[-1]
        if compiler == "torch.compile":
            return {"model": name, "error": "timeout after 9 s"}
        return {"model": name, "compilers": {"eager": {"first_call_s": 0.2},
                                             compiler: {"first_call_s": 3.0}}}  # fmt: skip

    monkeypatch.setattr(suites_run, "_spawn", spawn)
    args = argparse.Namespace(compilers=["eager", "torch.compile", "ember"], compile_lanes=2)
    cold = suites_run.compile_ahead([argparse.Namespace(name="m")], [], {}, args)
    assert cold["m"]["compilers"] == {
        "eager": {"first_call_s": 0.2},
        "torch.compile": {"error": "timeout after 9 s"},
        "ember": {"first_call_s": 3.0},
    }
    assert suites_run._brief_cold(cold["m"]) == (
        "eager 0.2 s, torch.compile timeout after 9 s, ember 3.0 s"
    )


def test_cold_compiles_are_named_with_what_failed() -> None:
    cold = {"compilers": {"eager": {"first_call_s": 0.3}, "ember": {"error": "CUDA error"}}}
    assert suites_run._brief_cold(cold) == "eager 0.3 s, ember CUDA error"
    assert suites_run._brief_cold({"error": "timeout after 9 s"}) == "timeout after 9 s"


def test_summary_names_slow_rows(tmp_path: Path) -> None:
    import summary

    def row(model: str, tc: float, em: float) -> dict:
        env = {"date": "d", "commit": "c", "machine": "m", "threads": 1, "torch": "t",
               "transformers": "x", "command": "cmd"}  # fmt: skip
        result = {"passes": True, "compile_s": 1.0, "first_call_s": 1.0, "peak_mb": None}
        return {"suite": "timm", "model": model, "mode": "infer-fp32", "batch": 2, "env": env,
                "compilers": {"eager": {**result, "speedup": 1.0},
                              "torch.compile": {**result, "speedup": tc},
                              "ember": {**result, "speedup": em, "graphs": 1}}}  # fmt: skip

    path = tmp_path / "r.jsonl"
    timed_out = {"suite": "timm", "model": "b", "mode": "infer-fp32", "skipped": "timeout"}
    records = [row("a", 2.0, 1.0), row("b", 1.0, 1.0), timed_out]  # b's rerun did not finish
    path.write_text("\n".join(json.dumps(r) for r in records))
    text = "\n".join(
        summary.table("timm", "infer-fp32", summary.load([str(path)])[("timm", "infer-fp32")])
    )
    assert "Below 0.9x torch.compile's speed: a 0.500." in text
    assert "| ember | 2/2 | 1.00x |" in text  # b's measurement stands
    assert "geomean speedup ratio 0.71x" in text and "Not run" not in text
    path.write_text(json.dumps(timed_out) + "\n" + json.dumps(row("a", 2.0, 1.0)))
    text = "\n".join(
        summary.table("timm", "infer-fp32", summary.load([str(path)])[("timm", "infer-fp32")])
    )
    assert "Not run: b (timeout)." in text


def test_pending_lists_the_models_not_yet_measured() -> None:
    import summary
    from models import SUITES

    first, second = (e.name for e in SUITES["torchvision"][:2])
    groups = {("torchvision", "train-bf16"): {first: {"compilers": {}}, second: {"error": "x"}}}
    lines = {line.split(" (")[0]: line for line in summary.pending(groups)}
    train = lines["torchvision train-bf16"]
    assert f"({len(SUITES['torchvision']) - 1} of " in train and first not in train.split(": ")[1]
    assert second in train and f"{first}," in lines["torchvision infer-fp32"]


def test_summary_update_rewrites_the_table_of_the_records_machine(tmp_path: Path) -> None:
    import summary

    env = {"date": "2026-12-01 10:00 UTC", "commit": "abc", "machine": "m", "threads": 1,
           "torch": "t", "transformers": "x", "command": "cmd"}  # fmt: skip
    result = {"passes": True, "compile_s": 1.0, "first_call_s": 1.0, "peak_mb": 10.0}
    record = {"suite": "timm", "model": "a", "mode": "infer-fp32", "batch": 2, "env": env,
              "device": "cuda",
              "compilers": {"eager": {**result, "speedup": 1.0},
                            "torch.compile": {**result, "speedup": 2.0},
                            "ember": {**result, "speedup": 3.0, "graphs": 1}}}  # fmt: skip
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(record) + "\n")
    old = "- 2026-11-01 09:00 UTC, commit old, m (1 threads), torch t, transformers x: `cmd`"
    doc = tmp_path / "perf.md"
    doc.write_text(
        "## Public suites (GPU, fp32 inference)\n#### timm, infer-fp32 (one model)\n\n"
        f"| stale |\n\n{old}\n  its old wrapped line\n\nProse kept.\n"
        "## Public suites (CPU, small sizes)\n#### timm, infer-fp32\n\n| cpu |\n\n"
        f"{old}\n"
    )
    assert summary.main(["--update", str(doc), str(results)]) == 0
    text = doc.read_text()
    assert "#### timm, infer-fp32 (one model)\n\n| compiler |" in text
    assert "geomean speedup ratio 1.50x" in text and "| stale |" not in text
    assert "commit abc" in text and "Prose kept." in text and "wrapped" not in text
    assert text.endswith(f"#### timm, infer-fp32\n\n| cpu |\n\n{old}\n")  # the CPU table stays
