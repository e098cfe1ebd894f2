"""Triton target tests: run on the CPU through Triton's interpreter (TRITON_INTERPRET=1,
set before triton is imported); skipped when triton is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import importlib.util

import pytest

if importlib.util.find_spec("triton") is None:
    pytest.skip("the Triton target tests need the 'triton' extra", allow_module_level=True)
import triton  # noqa: F401  (installed but broken, e.g. numpy missing: an error, not a skip)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpp_emit"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Kernel modules, autotune winners and Triton's cache in a session-private directory."""
    root = tmp_path_factory.getbasetemp() / "ember-triton-cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(root))
    yield


@pytest.fixture
def check():
    """check(fn, *inputs, atol=None, rtol=None, **options) -> compiled: compile for Triton,
    run twice, compare every output with eager (values, dtype, shape, strides)."""
    from triton_helpers import check as run

    return run


@pytest.fixture
def compile_prims():
    """compile_prims(fn, *inputs, **options) -> (schedule, compiled), without running it."""
    from triton_helpers import compile_triton_fn

    return compile_triton_fn


def pytest_configure(config):
    # masked-off lanes compute on placeholder values (0/0, log(0)): numpy warns, Triton on a
    # GPU does not; the results of those lanes are never stored
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.runtime.interpreter")
