"""Artifact-cache entries a process cannot use are rebuilt, never loaded: corrupt or
truncated files, another key's entry copied over this one's, a codegen level emptied under
its aot level; and graphs with lifted constants are cached by their bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from artifact_child import run_child


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache one cold child filled (each test damages its own copy)."""
    cache = tmp_path_factory.mktemp("filled") / "cache"
    run_child(cache)
    return cache


@pytest.fixture
def cache(filled, tmp_path):
    return shutil.copytree(filled, tmp_path / "cache", symlinks=True)


def test_corrupt_entries_are_rebuilt(cache):
    for entry in (cache / "artifacts").rglob("*.json"):
        entry.write_text('{"format": 1, "payload": ')
    rebuilt = run_child(cache)
    assert rebuilt["cache_misses"] == 2 and rebuilt.get("cache_hits", 0) == 0
    assert run_child(cache)["cache_hits"] == 2


def test_codegen_level_rebuilds_graphs_from_aot_entries(cache):
    for entry in (cache / "artifacts" / "codegen").rglob("*.json"):
        entry.unlink()
    result = run_child(cache)  # prim graphs rebuilt from their source, compiled again
    assert result["cache_hits"] == 2 and result["codegen_cache_misses"] == 3


CONSTANT_CHILD = textwrap.dedent(
    """
    import json, torch, ember

    def fn(x, w):
        table = torch.tensor([0.5, -1.0, 2.0, 4.0])  # lifted into the prim graphs as a constant
        return torch.sigmoid(x @ w) * table + table.sum()

    torch.manual_seed(0)
    x, w = torch.randn(3, 5), torch.randn(5, 4, requires_grad=True)
    compiled = ember.compile(fn, backend="inductor")
    out = compiled(x, w)
    out.sum().backward()
    grad = w.grad.clone()
    w.grad = None
    fn(x, w).sum().backward()
    torch.testing.assert_close(out, fn(x, w))
    torch.testing.assert_close(grad, w.grad)
    print(json.dumps(dict(ember.counters["inductor"])))
    """
)


def test_graphs_with_lifted_constants_are_cached(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("EMBER_ARTIFACT_CACHE", None)

    def run() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", CONSTANT_CHILD], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = run()
    assert cold["cache_misses"] == 1 and cold["codegen_cache_misses"] == 2
    assert "cache_bypasses" not in cold and "codegen_cache_bypasses" not in cold
    warm = run()
    assert warm["cache_hits"] == 1 and warm["codegen_cache_hits"] == 2
    assert warm.get("codegen_cache_misses", 0) == 0 and warm["backward_runs"] == 1


def test_entries_of_another_key_are_rebuilt_not_loaded(cache):
    """Each entry file copied over another key's (internally consistent, wrong graph):
    detected by the key recorded inside, rebuilt, and the results still match eager."""
    for level in ("aot", "codegen"):
        entries = sorted((cache / "artifacts" / level).rglob("*.json"))
        assert len(entries) >= 2
        data = [p.read_bytes() for p in entries]
        for path, other in zip(entries, data[1:] + data[:1], strict=True):
            path.write_bytes(other)
    rebuilt = run_child(cache)
    assert rebuilt["cache_misses"] == 2 and rebuilt.get("cache_hits", 0) == 0
    assert rebuilt["codegen_cache_misses"] == 3 and not rebuilt.get("codegen_cache_hits")
    assert run_child(cache)["cache_hits"] == 2


def test_artifact_dir_refuses_another_keys_entry(tmp_path, monkeypatch):
    from ember.backends.artifact_cache import ArtifactDir

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    store = ArtifactDir("codegen")
    x, y = "a" * 64, "b" * 64
    store.save(x, {"graph": "x"})
    store.save(y, {"graph": "y"})
    store.path(y).write_bytes(store.path(x).read_bytes())
    assert store.load(x) == {"graph": "x"}
    assert store.load(y) is None and not store.path(y).exists()  # deleted: rebuilt on save
    store.save(y, {"graph": "y"})
    store.path(y).write_bytes(store.path(y).read_bytes()[:-20])  # truncated
    assert store.load(y) is None
