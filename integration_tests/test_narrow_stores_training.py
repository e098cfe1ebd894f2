"""bf16 autocast training on the default backend (issue 28): a float32 buffer whose values
are all bfloat16 values (a relu's gradient rounded to bfloat16 and widened for the batch
norm's backward) is stored as bfloat16 and widened by its readers (ember_inductor_ir's
narrow_stores). A model of conv-bn-relu blocks with residual adds takes two compiled
training steps on the C++ target with the GPU's channels-last training decision
(`EMBER_CHANNELS_LAST=1`, where the GPU's graphs keep such buffers): its gradients equal
eager's within bf16 tolerance and equal, bit for bit, those of the same step compiled with
the pass switched off, while the backward graph allocates fewer float32 bytes. The same
test runs again on the Triton target through its CPU interpreter, in a child process
(TRITON_INTERPRET must be set before triton is imported)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import ember
import ember_inductor_ir
import ember_inductor_ir.stage
from ember.stats import counters

CHILD_FLAG = "EMBER_NARROW_STORES_TRITON_CHILD"
TRITON_ENV = {"TRITON_INTERPRET": "1", "EMBER_INDUCTOR_TARGET": "triton", CHILD_FLAG: "1"}


class ResidualNet(nn.Module):
    def __init__(self, channels: int = 16, classes: int = 5) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(3 if k == 0 else channels, channels, 3, padding=1, bias=False)
            for k in range(4)
        )
        self.norms = nn.ModuleList(nn.BatchNorm2d(channels) for _ in range(4))
        self.head = nn.Linear(channels, classes)

    def _block(self, k: int, x: torch.Tensor) -> torch.Tensor:
        return self.norms[k](self.convs[k](x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self._block(0, x))
        y = torch.relu(self._block(1, x))
        y = torch.relu(self._block(2, y) + x)
        z = torch.relu(self._block(3, y) + y)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))


def _step(model, x, labels):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    return loss


def _batch():
    torch.manual_seed(1)
    return torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))


def _compiled_grads(model, monkeypatch, cache) -> tuple[list[torch.Tensor], list]:
    """Two compiled steps (fresh compile, private cache): the gradients and the lowerings."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))
    counters.clear()
    ember.reset()
    seen = []
    lower = ember_inductor_ir.lower

    def spy(gm, example_inputs, **kwargs):
        seen.append(lower(gm, example_inputs, **kwargs))
        return seen[-1]

    monkeypatch.setattr(ember_inductor_ir, "lower", spy)
    compiled = ember.compile(_step, backend="inductor")
    x, labels = _batch()
    for _ in range(2):
        compiled(model, x, labels)
    assert counters["inductor"]["backward_graphs"] == 1, dict(counters["inductor"])
    assert counters["inductor"]["backward_runs"] == 2
    monkeypatch.setattr(ember_inductor_ir, "lower", lower)
    ember.reset()
    return [p.grad.clone() for p in model.parameters()], seen


def _computed_bytes(lowering, dtype: torch.dtype) -> int:
    return sum(
        int(op.layout.storage_numel()) * dtype.itemsize
        for op in lowering.operations
        if hasattr(op, "data") and op.layout.dtype == dtype
    )


def test_autocast_training_stores_rounded_gradients_as_bf16(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CHANNELS_LAST", "1")  # the GPU's training decision
    torch.manual_seed(0)
    model = ResidualNet()
    eager, plain = copy.deepcopy(model), copy.deepcopy(model)
    grads, lowerings = _compiled_grads(model, monkeypatch, tmp_path / "narrow")
    with monkeypatch.context() as off:
        off.setattr(ember_inductor_ir.stage, "narrow_stores", lambda lowering: [])
        plain_grads, plain_lowerings = _compiled_grads(plain, monkeypatch, tmp_path / "plain")

    x, labels = _batch()
    for _ in range(2):
        _step(eager, x, labels)
    for got, want, same in zip(
        grads, [p.grad for p in eager.parameters()], plain_grads, strict=True
    ):
        scale = want.abs().max().item() or 1.0
        # two bf16 steps: roundings in another order than eager's move a conv weight's
        # gradient by up to ~3% of its largest (0.029 and 0.031 measured as the head's
        # linear went from mm-then-add to eager's one addmm)
        assert (got - want).abs().max().item() <= 5e-2 * scale
        assert torch.equal(got, same)  # narrowing changes no bit

    backward, plain_backward = lowerings[-1], plain_lowerings[-1]
    want = "triton" if os.environ.get(CHILD_FLAG) == "1" else "cpp"
    assert backward.target.name == want
    narrowed = backward.narrowed
    assert narrowed and all(n.dtype == torch.bfloat16 for n in narrowed), narrowed
    for n in narrowed:
        buf = backward.buffers[n.name]
        assert buf.layout.dtype == torch.bfloat16 and buf.widen_to == torch.float32
    saved = sum(n.saved_bytes for n in narrowed)
    f32, plain_f32 = (_computed_bytes(lo, torch.float32) for lo in (backward, plain_backward))
    assert f32 == plain_f32 - 2 * saved and saved > 0, (f32, plain_f32, saved)


# a minute of interpreted training kernels: the extended session's (CI keeps the target's
# unit tests and the zoo through the interpreter)
@pytest.mark.extended
@pytest.mark.skipif(os.environ.get(CHILD_FLAG) == "1", reason="this is the child")
def test_on_the_triton_interpreter(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {**os.environ, **TRITON_ENV, "EMBER_CACHE_DIR": str(tmp_path / "cache")}
    case = f"{__file__}::test_autocast_training_stores_rounded_gradients_as_bf16"
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", case]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout


@pytest.fixture(autouse=True)
def _forget_compiled():
    yield
    ember.reset()
