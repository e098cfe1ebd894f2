"""Channels-last convolutions in training (issue 15), end to end against eager.

Two steps of `zero_grad; loss(model(x)); backward; opt.step()` inside one compiled function,
for the zoo's cnn, a torchvision-like residual block (conv-bn-relu, conv-bn, + identity,
relu), Inception's average pools between convolutions and HRNet's upsampling fusion, on
the C++ target with the GPU's training decision forced (`EMBER_CHANNELS_LAST=1`; the CPU's
own policy trains NCHW) and on the Triton target through its CPU interpreter with the
default policy (the GPU's: trains channels-last). Each checks losses, parameters and
optimizer state against eager, that every convolution (forward and backward) ran on NHWC
data with the saved activations crossing from forward to backward NHWC, that no aten
kernel ran (pooling's and upsampling's backward decomposed), and that a warm start from
the artifact cache (backward compiled from its cached source) gives the same.
User-visible outputs and gradients keep eager's strides.

The Triton cases run in one child pytest process (TRITON_INTERPRET must be set before triton
is imported); `test_triton_cases_on_the_interpreter` starts it.
"""

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
from ember.stats import counters
from ember_inductor_ir.layout import is_channels_last

CHILD_FLAG = "EMBER_CHANNELS_LAST_TRITON_CHILD"
IN_CHILD = os.environ.get(CHILD_FLAG) == "1"
TARGETS = ["triton"] if IN_CHILD else ["cpp"]
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")


class ResidualBlock(nn.Module):
    """torchvision's BasicBlock shape: conv-bn-relu, conv-bn, + identity, relu; then a head."""

    def __init__(self, channels: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn0(self.stem(x)))
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class InceptionPools(nn.Module):
    """Inception's average pools between convolutions: 3x3 stride 1 (a branch's pool), then
    a ceil-mode stride-2 pool counting no padding; their backward gathers, no aten kernel."""

    def __init__(self, channels: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.avg_pool2d(torch.relu(self.bn0(self.stem(x))), 3, 1, 1)
        x = torch.relu(self.bn1(self.conv(x)))
        x = nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
        return self.head(x.mean((2, 3)))


def _inception_pools():
    torch.manual_seed(0)
    return InceptionPools(), torch.randn(2, 3, 9, 9), torch.randint(0, 5, (2,))


class HRNetFuse(nn.Module):
    """HRNet's fusion: a stride-2 branch upsampled (nearest, x2) back onto the full one and
    added; the upsampling's backward is a block sum, no aten kernel."""

    def __init__(self, channels: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(channels)
        self.down = nn.Conv2d(channels, channels, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn0(self.stem(x)))
        low = self.bn1(self.down(x))
        x = torch.relu(x + nn.functional.interpolate(low, scale_factor=2, mode="nearest"))
        return self.head(x.mean((2, 3)))


def _hrnet_fuse():
    torch.manual_seed(0)
    return HRNetFuse(), torch.randn(2, 3, 8, 8), torch.randint(0, 5, (2,))


def _resblock():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    return ResidualBlock(), x, torch.randint(0, 5, (2,))


def _zoo_cnn():
    import ember_zoo

    case = ember_zoo.build("cnn", "tiny", seed=0)
    (x,) = case.example_inputs
    return case.model, x, case.targets[0]


MODELS = {
    "resblock": _resblock,
    "cnn": _zoo_cnn,
    "inception_pools": _inception_pools,
    "hrnet_fuse": _hrnet_fuse,
}


def _make_step(model, opt):
    def step(x, labels):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.fixture
def lowerings(monkeypatch, tmp_path):
    """Every GraphLowering the inductor backend builds (fresh cache, counters, policy)."""
    if not IN_CHILD:
        monkeypatch.setenv("EMBER_CHANNELS_LAST", "1")  # the GPU's training decision
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    counters.clear()
    ember.reset()
    seen = []
    lower = ember_inductor_ir.lower

    def spy(gm, example_inputs, **kwargs):
        lowering = lower(gm, example_inputs, **kwargs)
        seen.append(lowering)
        return lowering

    monkeypatch.setattr(ember_inductor_ir, "lower", spy)
    yield seen
    ember.reset()


def _convolutions(lowering, name):
    return [op for op in lowering.operations if getattr(op, "kernel_name", None) == name]


def _input_layout(lowering, extern, k):
    arg = extern.tensor_args()[k]
    return arg.view or lowering.buffers[arg.name].layout


def _assert_ran_channels_last(lowerings):
    forwards = [lw for lw in lowerings if _convolutions(lw, "convolution")]
    backwards = [lw for lw in lowerings if _convolutions(lw, "convolution_backward")]
    assert forwards and backwards
    for lw in forwards:
        for conv in _convolutions(lw, "convolution"):
            assert is_channels_last(_input_layout(lw, conv, 0))
            assert is_channels_last(conv.outputs[0].layout)
        saved = [o for o in lw.graph_outputs if o.layout is not None]
        assert any(is_channels_last(o.layout) for o in saved)  # activations leave NHWC
    for lw in backwards:
        nhwc_inputs = [n for n in lw.graph_inputs if is_channels_last(lw.buffers[n].layout)]
        assert nhwc_inputs  # compiled for the strides the forward produced
        for conv in _convolutions(lw, "convolution_backward"):
            assert is_channels_last(_input_layout(lw, conv, 0))  # grad_output
            assert is_channels_last(_input_layout(lw, conv, 1))  # input
        assert not any(o.layout and is_channels_last(o.layout) for o in lw.graph_outputs)
    aten_kernels = [
        op.kernel_name
        for lw in lowerings
        for op in lw.operations
        if str(getattr(op, "kernel_name", "")).startswith("aten::")
    ]
    assert not aten_kernels  # pooling's backward decomposed, fused with its neighbours


def _train_twice(name):
    model, x, labels = MODELS[name]()
    twin = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_twin = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    eager, compiled = _make_step(model, opt), ember.compile(_make_step(twin, opt_twin))
    for _ in range(2):
        torch.testing.assert_close(compiled(x, labels), eager(x, labels), rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(twin.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)
        assert mine.grad.stride() == theirs.grad.stride()
        mom, ref = opt_twin.state[mine]["momentum_buffer"], opt.state[theirs]["momentum_buffer"]
        torch.testing.assert_close(mom, ref, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(twin.buffers(), model.buffers(), strict=True):  # bn statistics
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_steps_run_convolutions_channels_last(name, target, lowerings):
    _train_twice(name)
    stats = counters["inductor"]
    assert stats["forward_graphs"] >= 2 and stats["backward_graphs"] == 1
    assert stats["backward_runs"] == 2
    _assert_ran_channels_last(lowerings)
    # a warm start: prim graphs from the aot cache, code from the codegen cache
    ember.reset()
    counters.clear()
    _train_twice(name)
    assert counters["inductor"]["cache_hits"] >= 1
    assert counters["inductor"]["backward_runs"] == 2


@pytest.mark.parametrize("target", TARGETS)
def test_user_visible_feature_maps_and_gradients_keep_eager_strides(target, lowerings):
    torch.manual_seed(0)
    # 4 input channels: an image's 3 into a few, read by no other convolution, stays NCHW
    # on the GPU (lowering/convolution.py's slow-NHWC rules)
    block = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    twin = copy.deepcopy(block)
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    x_twin = x.detach().clone().requires_grad_(True)
    out, got = block(x), ember.compile(twin)(x_twin)
    torch.testing.assert_close(got, out, rtol=1e-5, atol=1e-6)
    assert got.stride() == out.stride()
    out.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(x_twin.grad, x.grad, rtol=1e-4, atol=1e-5)
    assert x_twin.grad.stride() == x.grad.stride()
    # the conv bias's gradient is zero but for rounding (the batch norm takes the mean back
    # out), so its sum order shows at 1e-5: the absolute floor is 1e-4 (the weights' are O(1))
    for mine, theirs in zip(twin.parameters(), block.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-4)
    assert counters["inductor"]["backward_runs"] == 1
    (forward,) = [lw for lw in lowerings if _convolutions(lw, "convolution")]
    assert is_channels_last(_convolutions(forward, "convolution")[0].outputs[0].layout)


# a minute of interpreted training kernels: the extended session's (CI keeps the target's
# unit tests and the zoo through the interpreter)
@pytest.mark.extended
@pytest.mark.skipif(IN_CHILD, reason="the parent of the Triton cases")
def test_triton_cases_on_the_interpreter(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {
        **os.environ,
        CHILD_FLAG: "1",
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("EMBER_CHANNELS_LAST", None)  # the Triton target's own policy
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
        env=env, capture_output=True, text=True, timeout=1800, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "5 passed" in out.stdout, out.stdout[-2000:]
