"""The zoo's small models through the GPU code path without a GPU: `ember.compile` with the
Triton target forced (EMBER_INDUCTOR_TARGET=triton) and Triton's CPU interpreter
(TRITON_INTERPRET=1), inference and a training step, against eager, with kernels counted.

Each model runs in a child process so that TRITON_INTERPRET is set before triton is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")

CHILD = textwrap.dedent(
    """
    import json, sys, torch, ember, ember_zoo

    name = sys.argv[1]
    case = ember_zoo.build(name, "tiny", seed=0)
    twin = ember_zoo.build(name, "tiny", seed=0)
    compiled = ember.compile(twin.model)
    with torch.no_grad():
        for got, want in zip(
            ember_zoo.output_tensors(twin.run(compiled)),
            ember_zoo.output_tensors(case.run()),
            strict=True,
        ):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    loss = twin.loss(twin.run(compiled))
    loss.backward()
    expected = case.loss(case.run())
    expected.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-4)
    for mine, theirs in zip(twin.model.parameters(), case.model.parameters(), strict=True):
        if theirs.grad is not None:
            torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-3, atol=1e-4)
    print(json.dumps(dict(ember.counters["inductor"])))
    """
)


# rnn and gpt2 (about 40 s under the interpreter) run in `nox -s extended`; CI keeps a
# dense, a convolutional and an attention model
@pytest.mark.parametrize(
    "name",
    [
        "mlp",
        "cnn",
        "transformer_block",
        *(pytest.param(n, marks=pytest.mark.extended) for n in ("rnn", "gpt2")),
    ],
)
def test_zoo_model_through_triton_interpreter(name, tmp_path):
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-4000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["forward_graphs"] >= 2 and stats["backward_graphs"] >= 1  # infer + train
    assert stats["kernels"] > 0 and stats["backward_runs"] >= 1
