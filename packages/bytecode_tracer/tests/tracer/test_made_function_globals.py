"""A function made during the trace reads the globals of the module it was made in, and its
guards say so, also when a function of another module calls it (torch's `map` hands a nested
function of its module to a helper of another, which calls it).

Before, such a function's global reads were guarded through the *caller's* module: a guard
that failed on every call (recompiling each time) or, where the caller's module had a global
of the same name, checked the wrong value.
"""

from __future__ import annotations

import sys
import textwrap
import types

import pytest
import torch

from conftest import Compiled, same


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(textwrap.dedent(source), module.__dict__)
    sys.modules[name] = module
    return module


@pytest.fixture
def two_modules():
    _module(
        "ember_test_caller_mod",
        """
        FACTOR = 100.0  # same name as the maker's global: must not be the one read

        def call_it(fn, t):
            return fn(t)
        """,
    )
    maker = _module(
        "ember_test_maker_mod",
        """
        import ember_test_caller_mod

        FACTOR = 2.0

        def scaled(t):
            def inner(u):
                return u * FACTOR
            return ember_test_caller_mod.call_it(inner, t)
        """,
    )
    yield maker
    for name in ("ember_test_caller_mod", "ember_test_maker_mod"):
        sys.modules.pop(name, None)


def test_a_made_function_reads_and_guards_its_own_modules_globals(two_modules):
    maker = two_modules
    compiled = Compiled(maker.scaled)
    t = torch.randn(3)
    for _ in range(3):
        assert same(compiled(t), t * 2.0)
    assert compiled.backend.graph_count == 1  # the guard holds: no recompile per call
    maker.FACTOR = 5.0  # the global the nested function reads changed: a new trace
    assert same(compiled(t), t * 5.0)
    assert compiled.backend.graph_count == 2
