from __future__ import annotations

import pytest

import ember


@pytest.fixture
def private_kernel_cache(tmp_path, monkeypatch):
    """A cache folder of the test's own: each compile is cold, no file left behind."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    ember.reset()
    yield
    ember.reset()
