"""A bounded run of the tracer fuzzer (tools/fuzz_tracer.py): generated programs mixing
tensor ops, control flow, containers, closures, globals and graph-break constructs, each run
eager and through `eager` and `aot_eager` over rounds that change what they read. Every
program must match eager; the long run is `nox -s fuzz`."""

from __future__ import annotations

import pytest

import fuzz_programs
import fuzz_tracer

SEED = 20261126
COUNT = 60  # CI's bounded share (about 30 s); the long run is `nox -s fuzz`


@pytest.fixture(scope="module")
def results():
    seeds = [f"{SEED}:{i}" for i in range(COUNT)]
    features = fuzz_tracer.feature_set()
    return fuzz_tracer.run_many(
        seeds, ["eager", "aot_eager"], features, timeout=60, minimize_failures=False
    )


def test_every_program_matches_eager(results):
    failed = [r for r in results if r.status != "ok"]
    report = "\n".join(
        f"{r.seed} {r.status} {r.backend} round={r.round}: {r.message[:300]}"
        f"\n  rerun: python tools/fuzz_tracer.py --seed {r.seed.split(':')[0]} "
        f"--start {r.seed.split(':')[1]} --count 1 --out fuzz_out"
        for r in failed
    )
    assert not failed, report


def test_programs_really_compiled(results):
    # a silent fallback to eager would pass the comparison: most programs (about 2 in 3)
    # must have run graphs on both backends, and the rounds must have broken graphs and
    # raised in eager
    for backend in ("eager", "aot_eager"):
        with_graphs = sum(1 for r in results if r.graphs[backend])
        assert with_graphs >= 0.5 * COUNT, (backend, with_graphs)
    assert sum(r.breaks["eager"] for r in results) > COUNT // 5
    assert sum(1 for r in results if r.eager_raised) > 0


def test_generator_is_deterministic_and_covers_features():
    a = fuzz_programs.generate("7:3").source()
    assert a == fuzz_programs.generate("7:3").source()
    assert a != fuzz_programs.generate("7:4").source()
    text = "".join(fuzz_programs.generate(f"{SEED}:{i}").source() for i in range(COUNT))
    for construct in ("nonlocal", "lambda", "try:", "finally:", "torch.no_grad()", ".item()",
                      ".tolist()", "id(", "print(", "for ", "while ", "elif ", "MOD0(",
                      "helper", ".sum() > 0", "G_COUNT =", "lst.append"):  # fmt: skip
        assert construct in text, construct


def test_comparison_catches_differences():
    import torch

    assert fuzz_tracer.difference(torch.ones(2), torch.ones(2)) is None
    assert fuzz_tracer.difference(torch.ones(2), torch.ones(2, dtype=torch.float64))
    assert fuzz_tracer.difference(torch.ones(2), torch.ones(2) + 1e-3)
    assert fuzz_tracer.difference({"a": [1, (2.0,)]}, {"a": [1, (2.0,)]}) is None
    assert fuzz_tracer.difference({"a": [1, (2.0,)]}, {"a": [1, (2,)]})
    assert fuzz_tracer.difference([1, 2], [1, 2, 3])
