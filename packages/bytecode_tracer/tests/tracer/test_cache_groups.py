"""The cache limit counts recompiles of one function, not the other functions that share its
code object (a decorator's wrapper: one code, a closure per decorated function)."""

from __future__ import annotations

import logging

import torch

import ember_frame_hook as fh
from conftest import Compiled, same

x = torch.randn(3)


def plus_one(fn):
    def wrapper(a):  # transformers' `wrapped_func` / `wrapper` shape
        return fn(a) + 1

    return wrapper


def _make(k):
    # a plain function each (no cells: pinned by identity), as decorated methods are; a
    # decorated closure would be guarded by its code and cells (test_closure_guards.py)
    return plus_one(lambda a, k=k: a * k)


DECORATED = [_make(k) for k in range(12)]
WRAPPER_CODE = DECORATED[0].__code__


def test_functions_sharing_a_code_object_keep_their_entries(caplog):
    fh.set_cache_limit(4)
    try:
        compiled = Compiled(lambda f, a: f(a))
        with caplog.at_level(logging.WARNING, logger="ember.tracer"):
            for _ in range(2):
                for k, fn in enumerate(DECORATED):
                    assert same(compiled(fn, x), x * k + 1)
        assert not fh.is_skipped(WRAPPER_CODE)  # not given up for every closure
        assert len(fh.cache_entries(WRAPPER_CODE)) == 4
        before = fh.stats()["hits"]
        assert same(compiled(DECORATED[1], x), x + 1)
        assert fh.stats()["hits"] > before  # an early closure still runs its compiled code
        limit_warnings = [r for r in caplog.records if "recompiled" in r.getMessage()]
        assert limit_warnings == []
    finally:
        fh.set_cache_limit(8)


def test_recompiles_of_one_closure_still_hit_the_limit(caplog):
    def keyed(fn):
        def wrapper(a, key):
            return fn(a, key) + 1

        return wrapper

    wrapped = keyed(lambda a, key: a + len(key))
    fh.set_cache_limit(3)
    try:
        compiled = Compiled(wrapped)  # its own frame (a caller given up runs it as it is)
        with caplog.at_level(logging.WARNING, logger="ember.tracer"):
            for k in range(8):
                key = "k" * (k + 1)  # a new string each call: the same closure recompiles
                assert same(compiled(x, key), x + len(key) + 1)
        warnings = [r for r in caplog.records if "cache limit" in r.getMessage()]
        assert len(warnings) >= 1 and fh.is_skipped(wrapped.__code__)
    finally:
        fh.set_cache_limit(8)


def _add_n(a, n):
    return a + n


def _add_n_twice(a, n):
    return _add_n(a, n) + n


def _outer(a, n):
    a = a + n
    return _add_n_twice(a, n)


def test_a_frame_given_up_at_the_limit_runs_with_its_callees_as_they_are():
    fh.set_cache_limit(2)
    try:
        compiled = Compiled(_outer, dynamic=False)
        for n in range(8):
            assert same(compiled(x, n), x + 3 * n)
        assert fh.is_skipped(_outer.__code__)
        # compiled twice (n = 0, 1), its callees inlined; never compiled on their own
        assert compiled.backend.graph_count == 2
        assert not fh.cache_entries(_add_n.__code__) and not fh.is_skipped(_add_n.__code__)
        # called from elsewhere, a callee still compiles
        other = Compiled(_add_n_twice)
        assert same(other(x, 3), x + 6) and other.backend.graph_count == 1
    finally:
        fh.set_cache_limit(8)
