"""reduce-overhead's capture keying on the CPU: the CUDA calls stubbed by a CaptureBackend
that records what would be captured and replays by running the graph (checked vs eager)."""

from __future__ import annotations

import pytest
import torch

from ember.backends.cudagraphs import CudaGraphRunner, size_signature
from ember.backends.inductor_settings import InductorSettings, inductor_settings
from ember.exc import EmberError
from ember.stats import counters


class StubCaptures:
    """Captures are (compiled, size signature); a replay checks it is replayed at its own
    size and runs the graph."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.captured: list[tuple] = []

    def eligible(self, inputs):
        return True

    def capture(self, compiled, inputs, name):
        if self.fail:
            counters["cudagraphs"]["capture_failures"] += 1
            return None
        counters["cudagraphs"]["captures"] += 1
        self.captured.append(size_signature(inputs))
        return compiled, size_signature(inputs)

    def replay(self, capture, inputs):
        compiled, sizes = capture
        assert sizes == size_signature(inputs)  # never replayed at another size
        counters["cudagraphs"]["replays"] += 1
        return compiled(list(inputs))


def graph(inputs):
    x, n = inputs
    return [x.softmax(-1) * n]


@pytest.fixture(autouse=True)
def _counters():
    counters.clear()
    yield
    counters.clear()


def _call(runner, rows, n=3):
    x = torch.randn(rows, 5)
    (out,) = runner([x, n])
    torch.testing.assert_close(out, x.softmax(-1) * n)


def test_one_capture_per_size_signature_first_n_kept():
    stub = StubCaptures()
    runner = CudaGraphRunner(graph, "forward", max_sizes=2, backend=stub)
    for rows in (3, 3, 4, 4, 3, 6, 6, 4, 7):
        _call(runner, rows)
    # the first call warms up; sizes 3 and 4 are captured once each, 6 and 7 (over the
    # bound) run the graph without a capture, 3 and 4 keep replaying
    assert [s[0][0] for s in stub.captured] == [(3, 5), (4, 5)]
    stats = counters["cudagraphs"]
    assert stats["captures"] == 2
    assert stats["uncaptured_size_runs"] == 3
    assert stats["replays"] == 5  # 3, 4, 4, 3, 4
    assert not runner.disabled


def test_an_int_input_is_part_of_the_signature():
    stub = StubCaptures()
    runner = CudaGraphRunner(graph, "forward", max_sizes=8, backend=stub)
    for n in (2, 2, 5, 5, 2):
        _call(runner, 4, n)
    assert len(stub.captured) == 2 and counters["cudagraphs"]["replays"] == 4


def test_zero_sizes_captures_nothing_and_stays_correct():
    runner = CudaGraphRunner(graph, "forward", max_sizes=0, backend=StubCaptures())
    for rows in (3, 4, 3):
        _call(runner, rows)
    assert not counters["cudagraphs"]["captures"]
    assert counters["cudagraphs"]["uncaptured_size_runs"] == 2


def test_a_failed_capture_runs_without_cuda_graphs():
    runner = CudaGraphRunner(graph, "forward", backend=StubCaptures(fail=True))
    for rows in (3, 3, 4):
        _call(runner, rows)
    assert runner.disabled and counters["cudagraphs"]["capture_failures"] == 1


def test_cudagraph_sizes_option():
    assert inductor_settings().cudagraph_sizes == 8
    settings = inductor_settings("reduce-overhead", {"cudagraph_sizes": 3})
    assert settings == InductorSettings(cudagraphs=True, cudagraph_sizes=3)
    for bad in (-1, "4", True):
        with pytest.raises(EmberError, match="cudagraph_sizes"):
            inductor_settings(options={"cudagraph_sizes": bad})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures CUDA graphs: needs a GPU")
def test_a_training_step_with_dropout_is_captured():
    """Random prims draw their seed on the device (prims.next_seed), so the step captures;
    replays advance the CUDA generator (new masks), and reseeding it repeats them."""
    import ember

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.Dropout(0.5), torch.nn.Linear(64, 8)
    ).cuda()
    x = torch.randn(16, 64, device="cuda")
    ember.reset()
    step = ember.compile(model, mode="reduce-overhead")

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        out = step(x)
        out.square().mean().backward()
        return out.detach().clone(), model[0].weight.grad.clone()

    for _ in range(3):
        run()
    graphs = dict(counters["cudagraphs"])
    assert not graphs.get("capture_failures") and graphs.get("captures", 0) >= 2, graphs
    torch.manual_seed(1)
    first = run()
    second = run()
    torch.manual_seed(1)
    again = run()
    assert counters["cudagraphs"]["replays"] > graphs.get("replays", 0)
    assert not torch.equal(first[0], second[0])  # a replay draws a new mask
    for got, want in zip(again, first, strict=True):  # the same generator state, the same step
        torch.testing.assert_close(got, want)


ATTENTION_DROPOUT_CHILD = """
import torch, torch.nn.functional as F, ember
from ember.stats import counters

class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)

    def forward(self, x):
        q, k, v = self.qkv(x).view(4, 32, 3, 2, 32).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)

model = Attention().cuda()
step = ember.compile(model, mode="reduce-overhead")
x = torch.randn(4, 32, 64, device="cuda")
for _ in range(4):
    model.zero_grad()
    step(x).square().mean().backward()
    assert torch.isfinite(model.qkv.weight.grad).all()
torch.cuda.synchronize()
print(dict(counters["cudagraphs"]))
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures CUDA graphs: needs a GPU")
def test_attention_dropout_backward_after_a_captured_forward():
    """aten's efficient attention returns its dropout state on the device when replayed from
    a CUDA graph and on the host otherwise; a backward run outside capture after a captured
    forward read it on the host and crashed the process (GPT-2's default dropout under
    reduce-overhead). Run in a child process, so that a crash fails this test only."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", ATTENTION_DROPOUT_CHILD], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
