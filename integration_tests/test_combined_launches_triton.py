"""A training step with the optimizer inside the compiled function, through the Triton
target on Triton's CPU interpreter: the optimizer's one-parameter update kernels share
combined launches (ember_codegen triton/combo.py). Parameters and optimizer state match
eager after several steps, equal bit-for-bit those of separate launches
(EMBER_TRITON_COMBINE=0), and the launches a step makes are counted.

The child process sets TRITON_INTERPRET before triton is imported."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from ember_codegen import TRITON_TARGET

pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")

CHILD = textwrap.dedent(
    """
    import json, os, sys, torch, ember

    def model():
        torch.manual_seed(0)
        widths = [3, 5, 8, 13, 16, 7, 33, 12, 9, 4, 20, 6, 11, 17, 3, 10, 25, 8, 5, 14, 9, 6,
                  3, 2, 4, 3]
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
        return torch.nn.Sequential(*layers[:-1])  # 50 parameter tensors

    def optimizer(name, foreach, params):
        if name == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach)
        return torch.optim.AdamW(params, lr=0.01, foreach=foreach)

    def step(net, opt, x):
        opt.zero_grad()
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    def run(name, foreach, combine):
        os.environ["EMBER_TRITON_COMBINE"] = combine
        torch.manual_seed(1)
        x = torch.randn(16, 3)
        net = model()
        opt = optimizer(name, foreach, net.parameters())
        compiled = ember.compile(step)
        ember.reset()
        losses = [compiled(net, opt, x) for _ in range(2)]
        before = ember.counters["inductor"]["kernel_launches"]
        losses.append(compiled(net, opt, x))  # a steady step's launches
        launches = ember.counters["inductor"]["kernel_launches"] - before
        state = [v for p in net.parameters() for v in opt.state[p].values()]
        tensors = [*losses, *(p.detach() for p in net.parameters()), *state]
        return tensors, {**ember.counters["inductor"], "step_launches": launches}

    out = {}
    for name, foreach in [("sgd", False), ("adamw", False), ("adamw", True)]:
        torch.manual_seed(1)
        x = torch.randn(16, 3)
        net = model()
        opt = optimizer(name, foreach, net.parameters())
        want = [step(net, opt, x) for _ in range(3)]
        want += [p.detach() for p in net.parameters()]
        want += [v for p in net.parameters() for v in opt.state[p].values()]
        combined, stats = run(name, foreach, "1")
        alone, stats_alone = run(name, foreach, "0")
        assert len(combined) == len(want) == len(alone)
        for got, ref in zip(combined, alone):
            assert torch.equal(got, ref)  # the same kernels' math, launched together
        for got, ref in zip(combined, want):
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
        out[f"{name}-{foreach}"] = [stats, stats_alone]
    print(json.dumps(out))  # the counts: `python -c "$CHILD"` shows them
    """
)


@pytest.mark.extended  # 70 s of interpreted launches; the combo unit tests run in CI
def test_optimizer_step_updates_share_launches_under_the_interpreter(tmp_path):
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-4000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    # the optimizer graph's 50 update kernels share ceil(50 / max_kernels) launches
    saved = 50 - math.ceil(50 / TRITON_TARGET.combine.max_kernels)
    for case, (combined, alone) in results.items():
        assert combined["forward_graphs"] == alone["forward_graphs"], case
        assert "kernels_combined" not in alone, case
        assert combined["kernels_combined"] >= 50, case
        assert combined["kernels"] <= alone["kernels"] - saved, case
        # a steady step: forward, backward and the optimizer graph each run once
        assert combined["step_launches"] <= alone["step_launches"] - saved, case
