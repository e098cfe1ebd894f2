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


# PyTorch's test backends under dynamic sizes: the ones that run the graph as it is, and
# "inductor" (Ember's, through compile_fx), are called once (declared symbolic), the one
# running PyTorch's AOT once per size
DECLARED = """
import torch, ember, ember_redirect
import torch._dynamo.testing as testing
ember_redirect.install()
def fn(x, a):
    return torch.add(x, x.relu(), alpha=a) * x.shape[0]
for make, calls in ((testing.CompileCounter, 1), (testing.EagerAndRecordGraphs, 1),
                    (lambda: testing.CompileCounterWithBackend("eager"), 1),
                    (lambda: testing.CompileCounterWithBackend("inductor"), 1),
                    (lambda: testing.CompileCounterWithBackend("aot_eager"), 3)):
    torch._dynamo.reset()
    backend = make()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for n, a in ((4, 2), (6, 3), (8, 5)):
        x = torch.randn(n)
        assert torch.allclose(compiled(x, a), fn(x, a)), (backend, n, a)
    count = getattr(backend, "frame_count", None) or len(backend.graphs)
    assert count == calls, (type(backend).__name__, count)
print("ok")
"""


def test_torch_test_backends_declared_by_what_they_run(tmp_path: Path) -> None:
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", DECLARED], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")


# Dynamo's shape and recompile settings, read when a test compiles, reach Ember as the
# policy Ember has under its own name
SETTINGS = """
from unittest.mock import patch
import torch, ember, ember_redirect
import torch._dynamo.testing as testing
ember_redirect.install()
def fn(x):
    return x * 2
def compiles(sizes, **patches):
    torch._dynamo.reset()
    counter = testing.CompileCounter()
    with torch._dynamo.config.patch(**patches):
        compiled = torch.compile(fn, backend=counter)
    for n in sizes:
        x = torch.randn(n)
        assert torch.equal(compiled(x), x * 2)
    return counter.frame_count
sizes = (2, 3, 4, 5)
assert compiles(sizes) == 2  # automatic dynamic: the second size makes it symbolic
assert compiles(sizes, automatic_dynamic_shapes=False) == 4  # one compile per size
assert compiles(sizes, assume_static_by_default=False) == 1  # symbolic from the start
assert compiles(sizes, automatic_dynamic_shapes=False, recompile_limit=2) == 2  # then eager
with patch.object(torch._dynamo.config, "recompile_limit", 3):
    torch.compile(fn, backend="eager")
assert ember.config.cache_size_limit == 3
torch.compile(fn, backend="eager")
assert ember.config.cache_size_limit == torch._dynamo.config.recompile_limit
print("ok")
"""


def test_dynamo_shape_settings_map_to_embers_policy(tmp_path: Path) -> None:
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", SETTINGS], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")


# a backend that raises: the failure propagates to the caller, recognised (issubclass, as
# assertRaises checks; an `except` clause matches real subclasses only) by the name of
# torch.compile's exception (PyTorch's own class still is one); suppress_errors, mapped
# from Dynamo's setting when compiling, runs the frame as it is instead
BACKEND_FAILS = """
import unittest
import torch, ember, ember_redirect
import torch._dynamo.exc as dynamo_exc
ember_redirect.install()
def broken(gm, example_inputs):
    raise RuntimeError("no")
def fn(x):
    return x.cos() + 1
x = torch.randn(3)
case = unittest.TestCase()
with case.assertRaises(dynamo_exc.BackendCompilerFailed) as caught:  # issubclass, as tests
    torch.compile(fn, backend=broken)(x)
assert isinstance(caught.exception, ember.exc.BackendCompilerFailed), caught.exception
assert issubclass(ember_redirect.ORIGINAL["BackendCompilerFailed"], dynamo_exc.BackendCompilerFailed)
assert not issubclass(RuntimeError, dynamo_exc.BackendCompilerFailed)
torch._dynamo.reset()
with torch._dynamo.config.patch(suppress_errors=True):
    assert torch.allclose(torch.compile(fn, backend=broken)(x), fn(x))
print("ok")
"""


def test_backend_failure_caught_by_dynamos_name(tmp_path: Path) -> None:
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", BACKEND_FAILS], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")
