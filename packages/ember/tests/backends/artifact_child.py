"""The child process the artifact-cache tests run (test_artifact_cache.py and
test_artifact_cache_rebuilds.py): a small block compiled through `inductor`, checked against
eager in inference and training, printing the inductor counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
