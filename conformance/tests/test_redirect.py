"""The redirect plugin sends Inductor's tests' compile_fx to Ember's inductor backend.

Runs in a child process: the redirect replaces torch's entry points for the whole process.
pytest -q -p no:cacheprovider conformance/tests
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# the way Inductor's CommonTemplate compiles: its own backend, which calls compile_fx by the
# name imported from torch._inductor.compile_fx after the plugin is configured
CHILD = """
import torch, ember, ember_redirect
ember_redirect.install()
from torch._inductor.compile_fx import compile_fx
seen = []
def tests_backend(gm, example_inputs):
    seen.append(gm)
    return compile_fx(gm, example_inputs)
def model(a, b):
    return torch.tanh(a @ b) - b.sum()
compiled = torch.compile(model, backend=tests_backend, fullgraph=True)
a, b = torch.randn(3, 5), torch.randn(5, 5)
assert torch.allclose(compiled(a, b), model(a, b), atol=1e-5)
assert len(seen) == 1, seen
assert ember_redirect.CALLS == {"compile": 1, "compile_fx": 1}, ember_redirect.CALLS
assert ember.counters["inductor"]["forward_graphs"] == 1, ember.counters["inductor"]
# a compiled module is recognised by the name torch.compile's type has
compiled_module = torch.compile(torch.nn.Linear(2, 2))
assert isinstance(compiled_module, torch._dynamo.OptimizedModule)
assert torch._dynamo.eval_frame.OptimizedModule is not ember.OptimizedModule  # export's
print("ok")
"""


def test_inductor_tests_compile_fx_goes_to_embers_inductor(tmp_path: Path) -> None:
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")
