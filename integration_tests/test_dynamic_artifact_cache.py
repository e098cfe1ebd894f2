"""The codegen artifact cache keys a graph with symbolic sizes by its symbolic form (issue 13):
a second process compiling the same dynamic program reuses the first one's artifacts and
runs sizes the first never saw with no lowering, no code generation and no C++ build,
matching eager (inference, and training with a backward graph). On the C++ target, and on
the Triton target under its CPU interpreter (where the triton extra is installed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import json, os, sys, torch, ember
    import ember_codegen, ember_inductor_ir
    from ember_codegen.cpp import build
    from ember_codegen.wrapper.size_bindings import WRAPPER_STATS

    from ember.backends import artifact_cache
    if os.environ.get("PINNED_FINGERPRINT"):  # the first child's (see run_child)
        artifact_cache._fingerprint = os.environ["PINNED_FINGERPRINT"]

    work = {"lower": 0, "codegen": 0, "cpp_builds": 0}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            work[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    ember_inductor_ir.lower = counting("lower", ember_inductor_ir.lower)
    ember_codegen.compile_graph = counting("codegen", ember_codegen.compile_graph)
    build.build_library = counting("cpp_builds", build.build_library)

    def fn(x, w):
        h = torch.relu(x @ w).softmax(-1)
        return h.sum(1) * 2 + x.size(1), (h * x).mean()

    def with_constant(x, w):
        scale = torch.tensor([0.5, -1.0, 2.0, 4.0] * 4)  # lifted into the graphs
        return (torch.relu(x @ w) * scale).sum(1) + scale.sum()

    fn = with_constant if sys.argv[2:] == ["constant"] else fn

    torch.manual_seed(0)
    w = torch.randn(16, 16, requires_grad=True)
    options = {"target": "triton"} if os.environ.get("TRITON_INTERPRET") == "1" else None
    compiled = ember.compile(fn, dynamic=True, options=options)
    for b, t in json.loads(sys.argv[1]):
        x = torch.randn(b, t, 16)
        with torch.no_grad():
            for got, want in zip(compiled(x, w), fn(x, w)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        got = compiled(x, w)
        sum(o.sum() for o in got).backward()
        grad, w.grad = w.grad, None
        sum(o.sum() for o in fn(x, w)).backward()
        torch.testing.assert_close(grad, w.grad, rtol=1e-4, atol=1e-4)
        w.grad = None
    print(json.dumps({
        "inductor": dict(ember.counters["inductor"]),
        "wrappers": dict(WRAPPER_STATS),
        "work": work,
        "fingerprint": artifact_cache.code_fingerprint(),
    }))
    """
)


# the Triton target's children (its interpreter, about 60 s together) run in `nox -s
# extended`; CI keeps the C++ target's, and the Triton target's symbolic kernels themselves
# (test_dynamic_triton.py)
TARGETS = ["cpp", pytest.param("triton", marks=pytest.mark.extended)]


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    if request.param == "triton":
        pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    return request.param


#: the first child's code fingerprint, given to the later ones: in a working tree that
#: others edit meanwhile, a changed stage source would (rightly) change every key
_FINGERPRINT: dict[Path, str] = {}


def run_child(cache: Path, sizes: list, target: str = "cpp", program: str = "") -> dict:
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache)}
    env["PINNED_FINGERPRINT"] = _FINGERPRINT.get(cache, "")
    env.pop("EMBER_ARTIFACT_CACHE", None)
    env.pop("TRITON_INTERPRET", None)
    if target == "triton":
        env["TRITON_INTERPRET"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sizes), *([program] if program else [])],
        env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    _FINGERPRINT.setdefault(cache, result["fingerprint"])
    return result


def test_second_process_runs_unseen_sizes_without_building(tmp_path, target):
    cache = tmp_path / "cache"
    cold = run_child(cache, [[2, 3], [3, 5]], target)
    stats = cold["inductor"]
    # inference, forward and backward: symbolic graphs, compiled once each and saved
    assert stats["codegen_cache_misses"] == 3 and not stats.get("codegen_cache_bypasses")
    assert not stats.get("static_specializations")
    assert cold["work"]["codegen"] == 3 and cold["wrappers"]["symbolic"] == 3
    assert cold["work"]["cpp_builds"] >= (target == "cpp")
    entries = list((cache / "artifacts" / "codegen").rglob("*.json"))
    assert len(entries) == 3
    libraries = sorted(p.name for p in cache.rglob("*.so"))

    warm = run_child(cache, [[4, 7], [5, 9], [6, 2]], target)  # sizes never seen before
    stats = warm["inductor"]
    assert stats["codegen_cache_hits"] == 3 and not stats.get("codegen_cache_misses")
    assert warm["work"] == {"lower": 0, "codegen": 0, "cpp_builds": 0}
    assert not warm["wrappers"]  # no wrapper written: each came from its entry
    assert stats["forward_runs"] >= 6 and stats["backward_runs"] == 3
    assert sorted(p.name for p in cache.rglob("*.so")) == libraries


# The next two (about 100 s of cold C++ builds in CI) run in `nox -s extended`; CI keeps the
# same checks on static graphs (packages/ember/tests/backends/test_artifact_cache.py).
@pytest.mark.extended
def test_entry_of_another_symbolic_graph_is_rebuilt(tmp_path, target):
    """An entry copied over another key's file: detected by the key it records, rebuilt."""
    cache = tmp_path / "cache"
    run_child(cache, [[2, 3]], target)
    entries = sorted((cache / "artifacts" / "codegen").rglob("*.json"))
    data = [p.read_bytes() for p in entries]
    for path, other in zip(entries, data[1:] + data[:1], strict=True):
        path.write_bytes(other)  # each entry now holds another graph's artifact
    rebuilt = run_child(cache, [[4, 7]], target)
    assert rebuilt["inductor"]["codegen_cache_misses"] == 3
    assert not rebuilt["inductor"].get("codegen_cache_hits")
    assert rebuilt["work"]["codegen"] == 3
    assert run_child(cache, [[3, 4]], target)["inductor"]["codegen_cache_hits"] == 3


@pytest.mark.extended
def test_graphs_with_lifted_constants_are_keyed_by_their_bytes(tmp_path):
    cache = tmp_path / "cache"
    cold = run_child(cache, [[2, 3]], program="constant")
    assert cold["inductor"]["codegen_cache_misses"] == 3
    assert not cold["inductor"].get("codegen_cache_bypasses")
    warm = run_child(cache, [[5, 4], [3, 9]], program="constant")
    assert warm["inductor"]["codegen_cache_hits"] == 3
    assert warm["work"] == {"lower": 0, "codegen": 0, "cpp_builds": 0}
