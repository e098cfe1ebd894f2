"""The memory plan on vision-model blocks (issue 28's inference peak): a pointwise kernel
writes over the library result or activation it reads last, library results are handed on
once dead. ``Schedule.peak_bytes`` (the plan replayed) before and after, per model at these
sizes, fp32 inference, on both targets (the C++ one here, the Triton one through Triton's
interpreter in a child process):

| model | before | after | no in-place bound (live_bytes_bound) |
|---|---:|---:|---:|
| ConvNeXt-atto-like, 2 blocks, 4x3x64x64 | 1,646,592 (C++ 1,810,432) | 983,040 | 1,474,560 |
| ResNet bottlenecks x3, 4x3x32x32 | 1,966,080 | 1,310,720 | 1,572,864 |
| ViT blocks x2, 4x65x64 | 800,800 (C++ 1,067,040) | 532,480 | 732,160 |

Results against eager (inference and a training step), graphs counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import ember
import ember_inductor_ir


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-1))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y))))
        return x + (y * self.gamma).permute(0, 3, 1, 2)


class ConvNeXtAtto(nn.Module):
    def __init__(self, dim=40, depth=2):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 4, stride=4)
        self.blocks = nn.Sequential(*[ConvNeXtBlock(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride=1):
        super().__init__()
        cout = 4 * mid
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.layers = nn.Sequential(Bottleneck(16, 8), Bottleneck(32, 8), Bottleneck(32, 16, 2))

    def forward(self, x):
        return self.layers(F.relu(self.stem(x))).mean((2, 3))


class ViTBlock(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        self.blocks = nn.Sequential(*[ViTBlock() for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)


def _channels_last(t):
    return t.to(memory_format=torch.channels_last) if t.dim() == 4 else t


#: model -> (builder, input, the plan's peak after this change: fp32 inference, both targets)
CASES = {
    "convnext": (ConvNeXtAtto, (4, 3, 64, 64), 983_040),
    "resnet": (ResNetStack, (4, 3, 32, 32), 1_310_720),
    "vit": (ViT, (4, 65, 64), 532_480),
}


def build(name):
    make, shape, _ = CASES[name]
    torch.manual_seed(0)
    model = make().eval()
    if len(shape) == 4:
        model = model.to(memory_format=torch.channels_last)
    return model, _channels_last(torch.randn(shape))


def inference_peaks(name):
    """Compile ``name`` for inference, check it against eager; the plans' peaks."""
    scheds = []
    schedule = ember_inductor_ir.schedule

    def capture(lowering, **options):
        scheds.append(schedule(lowering, **options))
        return scheds[-1]

    ember_inductor_ir.schedule = capture
    try:
        model, x = build(name)
        ember.reset()
        compiled = ember.compile(model)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    finally:
        ember_inductor_ir.schedule = schedule
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
    return [(s.peak_bytes(), s.live_bytes_bound()) for s in scheds]


def train_step_like_eager(name):
    model, x = build(name)
    model.train()
    twin, _ = build(name)
    twin.train()
    ember.reset()
    compiled = ember.compile(twin)
    compiled(x).square().mean().backward()
    model(x).square().mean().backward()
    for mine, theirs in zip(twin.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-3, atol=1e-4)
    stats = ember.counters["inductor"]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1, dict(stats)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))  # compiled, not loaded


@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_peak_on_the_cpp_target(name):
    ((peak, bound),) = inference_peaks(name)
    assert peak <= CASES[name][2], (peak, bound)
    assert peak < bound  # below any plan without in-place writes


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_step_on_the_cpp_target(name):
    train_step_like_eager(name)


# One child for every model: inference peaks of each, and a training step for one of them
# (the Triton interpreter runs a ResNet step in over a minute; the other targets' steps are
# checked above, and test_training_step.py covers training on the Triton target).
TRITON_TRAINED = "vit"
CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[2])
    from test_memory_plan_peak import CASES, inference_peaks, train_step_like_eager

    peaks = {name: inference_peaks(name) for name in sorted(CASES)}
    train_step_like_eager(sys.argv[1])
    print(json.dumps(peaks))
    """
)


@pytest.mark.extended  # about 35 s of interpreted kernels; CI measures the C++ target's peaks
def test_inference_peaks_and_a_training_step_on_the_triton_interpreter(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
    }
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, TRITON_TRAINED, here],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    peaks = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(peaks) == sorted(CASES)
    for name, ((peak, bound),) in peaks.items():
        assert peak <= CASES[name][2], (name, peak, bound)
        assert peak < bound, name


class _LibraryResults(TorchDispatchMode):
    """Counts, at each convolution, how many earlier convolutions' results are alive."""

    def __init__(self):
        super().__init__()
        self.made, self.alive_at_calls = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func.overloadpacket is torch.ops.aten.convolution:
            self.alive_at_calls.append(sum(r() is not None for r in self.made))
            self.made.append(weakref.ref(result))
        return result


def _conv_cat_conv(x, w1, w2):
    first = F.conv2d(x, w1, padding=1)
    wider = torch.cat([first.sin(), first.cos()], 1)  # first's last reader, stored apart
    return F.conv2d(wider, w2, padding=1)


def test_a_library_result_dies_with_its_last_reader():
    """The wrapper held each library call's result under one name until the next library
    call had returned: past its last reader, beside the next call's own result, a peak the
    plan did not count (PoolFormer's stem result beside its first MLP hidden: 514.5 MB
    against the plan's 441 on the H200; Inception 1050 -> 1013)."""
    x, w1, w2 = torch.randn(8, 3, 32, 32), torch.randn(16, 3, 3, 3), torch.randn(64, 32, 3, 3)
    ember.reset()
    compiled = ember.compile(_conv_cat_conv)
    with torch.no_grad():
        compiled(x, w1, w2)
        mode = _LibraryResults()
        with mode:
            out = compiled(x, w1, w2)
    torch.testing.assert_close(out, _conv_cat_conv(x, w1, w2), atol=1e-4, rtol=1e-4)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
    assert mode.alive_at_calls == [0, 0]
