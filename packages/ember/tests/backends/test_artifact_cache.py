"""The inductor backend's on-disk artifact cache: a second process over the same cache
directory hits (and still matches eager, inference and training); a different input shape,
dtype or model code misses; corrupt entries are rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

CHILD = textwrap.dedent(
    """
    import json, sys, torch, ember

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 16)
            self.norm = torch.nn.LayerNorm(16)

        def forward(self, x):
            return torch.nn.functional.gelu(self.norm(self.fc(x))).softmax(-1) * SCALE

    shape, dtype = json.loads(sys.argv[1]), getattr(torch, sys.argv[2])
    device = sys.argv[3]
    torch.manual_seed(0)
    model = Block().to(dtype=dtype, device=device)
    twin = Block().to(dtype=dtype, device=device)
    twin.load_state_dict(model.state_dict())
    x = torch.randn(*shape, dtype=dtype, device=device)
    compiled = ember.compile(twin, backend="inductor")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    loss = compiled(x).square().sum()
    loss.backward()
    expected = model(x).square().sum()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for mine, theirs in zip(twin.parameters(), model.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)
    print(json.dumps(dict(ember.counters["inductor"])))
    """
)


def run_child(
    cache: Path, shape=(5, 8), dtype="float32", scale="2.5", device: str = "cpu", prelude=""
) -> dict:
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache)}
    env.pop("EMBER_ARTIFACT_CACHE", None)
    source = prelude + CHILD.replace("SCALE", scale)
    out = subprocess.run(
        [sys.executable, "-c", source, json.dumps(list(shape)), dtype, device],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("artifacts") / "cache"
    cold = run_child(cache)
    return cache, cold


def test_cold_process_misses_and_fills_the_cache(warm_cache):
    cache, cold = warm_cache
    assert cold["cache_misses"] == 2  # the inference variant and the training variant
    assert cold.get("cache_hits", 0) == 0
    assert cold["codegen_cache_misses"] == 3  # inference, forward, backward graphs
    assert list((cache / "artifacts" / "aot").rglob("*.json"))


def test_second_process_hits_and_matches_eager(warm_cache):
    cache, _ = warm_cache
    warm = run_child(cache)
    assert warm["cache_hits"] == 2 and warm.get("cache_misses", 0) == 0
    assert warm["codegen_cache_hits"] == 3 and warm.get("codegen_cache_misses", 0) == 0
    assert warm["forward_runs"] == 2 and warm["backward_runs"] == 1


#: every kernel a translation unit of its own (up to the three compile workers)
SPLIT = (
    "import os; os.environ['EMBER_COMPILE_WORKERS'] = '3'\n"
    "from ember_codegen.cpp.emit import source; source.MIN_UNIT_CHARS = 1\n"
)
#: a process that must find every library in the kernel cache
NO_BUILD = (
    "from ember_codegen.cpp import build\n"
    "def _refuse(*args, **kwargs): raise AssertionError('a warm start compiled C++')\n"
    "build.build_library = _refuse\n"
)


def test_graphs_split_in_several_libraries_hit_without_building(tmp_path):
    cache = tmp_path / "cache"
    cold = run_child(cache, prelude=SPLIT)
    assert cold["codegen_cache_misses"] == 3
    assert len(list((cache / "cpp").rglob("*.so"))) > 3  # more libraries than graphs
    warm = run_child(cache, prelude=SPLIT.replace("'3'", "'1'") + NO_BUILD)
    assert warm["codegen_cache_hits"] == 3 and warm.get("codegen_cache_misses", 0) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Triton binaries: needs a GPU")
def test_a_cuda_process_hits_and_launches_the_cached_binaries_directly(tmp_path):
    """The wrapper read back from disk gets every direct launch (the launcher or its
    compiled launch function) rebuilt for its kernels, and still matches eager."""
    cold = run_child(tmp_path / "cache", device="cuda")
    warm = run_child(tmp_path / "cache", device="cuda")
    assert cold["codegen_cache_misses"] == 3
    assert warm["codegen_cache_hits"] == 3 and warm.get("codegen_cache_misses", 0) == 0


@pytest.mark.parametrize(
    "change",
    [{"shape": (7, 8)}, {"dtype": "float64"}, {"scale": "3.5"}],
    ids=["shape", "dtype", "model_code"],
)
def test_changed_shape_dtype_or_code_misses(warm_cache, tmp_path, change):
    cache, _ = warm_cache
    result = run_child(cache, **change)
    assert result.get("cache_hits", 0) == 0 and result["cache_misses"] == 2


def test_corrupt_entries_are_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    run_child(cache)
    for entry in (cache / "artifacts").rglob("*.json"):
        entry.write_text('{"format": 1, "payload": ')
    rebuilt = run_child(cache)
    assert rebuilt["cache_misses"] == 2 and rebuilt.get("cache_hits", 0) == 0
    assert run_child(cache)["cache_hits"] == 2


def test_codegen_level_rebuilds_graphs_from_aot_entries(tmp_path):
    cache = tmp_path / "cache"
    run_child(cache)
    for entry in (cache / "artifacts" / "codegen").rglob("*.json"):
        entry.unlink()
    result = run_child(cache)  # prim graphs rebuilt from their source, compiled again
    assert result["cache_hits"] == 2 and result["codegen_cache_misses"] == 3


def user_helper(x):
    return x * 2


def test_graph_calling_a_user_function_is_bypassed(tmp_path, monkeypatch):
    import torch

    import ember

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    ember.reset()

    def fn(x):
        return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(fn)
    gm.graph.call_function(user_helper, (next(iter(gm.graph.nodes)),))
    gm.recompile()
    from ember.backends.aot_artifact import Uncacheable, aot_key

    with pytest.raises(Uncacheable, match="user_helper"):
        aot_key(gm, [], [torch.randn(3)], "")
    x = torch.randn(4, requires_grad=False)
    compiled = ember.compile(lambda t: user_helper(torch.relu(t)), backend="inductor")
    torch.testing.assert_close(compiled(x), user_helper(torch.relu(x)))
    assert ember.counters["inductor"].get("cache_hits", 0) == 0
    ember.reset()


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


def test_entries_of_another_key_are_rebuilt_not_loaded(tmp_path):
    """Each entry file copied over another key's (internally consistent, wrong graph):
    detected by the key recorded inside, rebuilt, and the results still match eager."""
    cache = tmp_path / "cache"
    run_child(cache)
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


def test_cache_hits_count_collectives_as_a_compile_does(tmp_path, monkeypatch):
    """A functional collective stays an aten op, counted in counters['collectives'] (never
    an aten fallback), whether the graph was compiled or came from the aot or codegen cache
    (two ranks share one cache: the second rank hits)."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    import ember

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("needs torch.distributed with gloo")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:

        def fn(x, w):
            return funcol.all_reduce(torch.relu(x @ w), "sum", dist.group.WORLD) * 0.5

        x, w = torch.randn(4, 3), torch.randn(3, 5)
        expected = fn(x, w)
        seen = []
        for _ in range(2):  # the second compile is served by the cache
            ember.reset()
            torch.testing.assert_close(ember.compile(fn, backend="inductor")(x, w), expected)
            seen.append(
                (
                    dict(ember.counters["collectives"]),
                    dict(ember.counters["aten_fallbacks"]),
                    ember.counters["inductor"].get("cache_hits", 0),
                )
            )
        want = {
            "_c10d_functional.all_reduce.default": 1,
            "_c10d_functional.wait_tensor.default": 1,
        }
        assert seen[0] == (want, {}, 0)
        assert seen[1] == (want, {}, 1)
    finally:
        dist.destroy_process_group()
        ember.reset()
