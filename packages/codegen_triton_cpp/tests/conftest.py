"""Shared fixtures: a session-private kernel cache and builder, and per-test empty caches."""

from __future__ import annotations

import pytest

from ember_codegen import CppBuilder, KernelCache


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("ember-cache") / "root")


@pytest.fixture(scope="session")
def builder(session_cache) -> CppBuilder:
    return CppBuilder(session_cache)


@pytest.fixture
def fresh_cache(tmp_path) -> KernelCache:
    """An empty cache of its own (for tests that count hits and misses)."""
    return KernelCache(tmp_path / "cache")


@pytest.fixture
def fresh_builder(fresh_cache, builder) -> CppBuilder:
    """A builder over an empty cache, reusing the session's probed toolchain."""
    return CppBuilder(fresh_cache, toolchain=builder.toolchain)
