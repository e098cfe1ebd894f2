"""The whole pipeline (ember.compile -> tracer -> aot -> prims -> loop IR -> Triton) on CPU
tensors under the interpreter, with the umbrella's EMBER_INDUCTOR_TARGET=triton override."""

import os
import re

import pytest
import torch

ember = pytest.importorskip("ember")


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(12, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.softmax(self.norm(torch.nn.functional.gelu(self.fc(x))), dim=-1).sum(0)


def test_model_forward_and_backward_through_ember_compile(monkeypatch):
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    torch.manual_seed(0)
    model, x = _Block(), torch.randn(6, 12)
    compiled = ember.compile(model, backend="inductor")
    want = model(x)
    got = compiled(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    got.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want.sum().backward()
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)
    assert ember.counters["inductor"]["kernels"] >= 2


def test_triton_graphs_come_back_from_the_artifact_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_ARTIFACT_CACHE", raising=False)
    torch.manual_seed(0)
    model, x = _Block(), torch.randn(6, 12)
    results = []
    for _ in range(2):  # cold, then warm (after a reset: nothing in memory)
        ember.reset()
        # a fresh process has not pointed Triton's binary cache under ours yet
        monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
        compiled = ember.compile(model, backend="inductor")
        out = compiled(x)
        out.sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
        model.zero_grad()
        stats = dict(ember.counters["inductor"])
    assert stats.get("codegen_cache_hits", 0) == 2, stats  # forward and backward graphs
    # the warm load found Triton's binaries where the cold compile put them
    assert os.environ["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert stats.get("codegen_cache_bypasses", 0) == 0, stats
    (cold, cold_grads), (warm, warm_grads) = results
    torch.testing.assert_close(warm, cold)
    for a, b in zip(cold_grads, warm_grads, strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(warm, model(x), atol=1e-5, rtol=1e-5)


class _PoolMixer(torch.nn.Module):
    """PoolFormer's token mixer: a one-group GroupNorm, then a 3x3 average over it."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = torch.nn.GroupNorm(1, channels)
        self.pool = torch.nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.fc = torch.nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        y = self.norm(x)
        return self.fc(x + (self.pool(y) - y))


def _pool_mixer_source(monkeypatch, channels: int) -> str:
    """The Triton source Ember generates for a _PoolMixer over channels-last (2, C, 7, 7)
    (the ``ember.output_code`` log), checked against eager. Kernels are cached in memory by
    their source: each test takes its own channel count to see its kernels generated."""
    import logging

    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    monkeypatch.setenv("EMBER_LOGS", "output_code")  # ember.compile sets the log's level
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    log = logging.getLogger("ember.output_code")
    handler, level = Keep(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        torch.manual_seed(0)
        model = _PoolMixer(channels)
        x = torch.randn(2, channels, 7, 7).to(memory_format=torch.channels_last)
        with torch.no_grad():
            got = ember.compile(model, backend="inductor")(x)
            torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return "\n".join(records)


def test_windows_over_a_group_norm_index_plainly(monkeypatch):
    """The group norm's statistics split only the channels into groups (no flattening of
    C, H, W and back), so each 3x3 window of the average reads its input at a plain offset;
    through a flattened view every window element divided and wrapped its index (4x the
    time of torch.compile's kernel on the GPU). The window loops over neighbouring points
    side by side (a column tile); the 1x1 convolution's bias is added by a loop kernel, not the library."""
    source = _pool_mixer_source(monkeypatch, 8)
    window = source[source.index("x reduce [3, 3]") :]
    window = window[: window.index("\n\n")]
    assert "% 392" not in window and "// 49" not in window, window
    start = source.index("x reduce [3, 3]")
    name = source[source.rindex("\n", 0, start) + 1 : start].split(":")[0].lstrip("# ")
    launch = re.search(rf"_k_{name}\[.*XBLOCK=(\d+), RBLOCK=(\d+)", source)
    assert launch and int(launch[1]) > 1, name  # neighbouring points side by side
    assert "convolution(" in source and ", None, [1, 1], [0, 0]" in source  # bias in a kernel


def test_window_loads_of_per_row_values_take_only_the_rows_mask(monkeypatch):
    """Inside the 3x3 window's padding masks, the group norm's per-sample statistics (index
    `// 784`) are in bounds wherever the kernel's rows are: they load under the row mask
    alone, once per row, not once per window element under each element's padding mask
    (on sm_90, 160 scalar loads a thread in PoolFormer's window kernel, 16 without). The
    window's own data stays under its padding mask."""
    source = _pool_mixer_source(monkeypatch, 16)
    window = source[source.index("for roffset in tl.static_range(0, 9") :]
    window = window[: window.index("\n    red")]  # the window loop's body
    loads = [line for line in window.splitlines() if "tl.load" in line]
    per_row = [line for line in loads if "rindex" not in line]  # statistics, affine weights
    assert sum("// 784)" in line for line in per_row) == 2, loads
    assert all(line.endswith(", xmask, other=0)") for line in per_row), per_row
    padded = [line for line in loads if "rindex" in line]  # the window's own elements
    assert padded and all("rxmask & tmp" in line for line in padded), padded
