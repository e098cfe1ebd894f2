"""Immutable library values answered at trace time (issue 26): torch.__version__ (a str
subclass that compares as a version), compiled regular expressions and their matches,
read and compared now, in one graph, matching eager; integration_tests/
test_library_constants_inductor.py runs the same under the default backend."""

from __future__ import annotations

import re

import torch
from packaging import version

from conftest import Compiled, same

RELEASE = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)(?P<rest>.*)")


def test_a_version_check_on_torch_version_is_one_graph():
    def fn(x):
        if version.parse(torch.__version__) >= version.parse("2.0.0"):
            return x + 1
        return x - 1

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_torch_version_string_methods_and_comparisons():
    def fn(x):
        major = int(torch.__version__.split(".")[0])
        newer = torch.__version__ >= "2.0"
        return x * major + newer + torch.__version__.startswith("2")

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_compiled_pattern_and_its_match_are_constants():
    def fn(x, text):
        found = RELEASE.fullmatch(text)
        if found is None:
            return x
        major, minor = int(found.group("major")), int(found.group(2))
        return x * major + minor + len(found.groupdict()["rest"]) + found.span()[1]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for text in ("2.13.0+cpu", "nothing", "1.2"):
        assert same(compiled(x, text), fn(x, text))
    assert not compiled.breaks


def test_a_pattern_sub_with_a_function_is_not_run_at_trace_time():
    calls = []

    def repl(m):
        calls.append(m.group(0))
        return "x"

    def fn(x):
        return x + len(RELEASE.sub(repl, "1.2"))

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), x + 1)
    assert calls == ["1.2"]  # once, by the code itself, not again by the tracer
