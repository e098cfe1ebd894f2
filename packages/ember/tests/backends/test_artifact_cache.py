"""The inductor backend's on-disk artifact cache: a second process over the same cache
directory hits (and still matches eager, inference and training); a different input shape,
dtype or model code misses (entries that cannot be used: test_artifact_cache_rebuilds.py)."""

from __future__ import annotations

import pytest
import torch
from artifact_child import run_child


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


def test_wrapper_constants_round_trip_devices_and_dtypes():
    """A wrapper constant that is a device (a fallback's ``device=``) is stored, not a reason
    to bypass the cache: ghostnet's training step recompiled one graph on every warm start."""
    import torch

    from ember.backends.codegen_artifact import _decode, _encode

    for value in (torch.device("cpu"), torch.device("cuda", 1), torch.bfloat16, 2.5, None):
        assert _decode(_encode(value)) == value
