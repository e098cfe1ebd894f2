"""pytest plugin (`-p ember_redirect`): PyTorch's own test files, compiled by Ember.

Before collection it replaces the entry points PyTorch's Dynamo tests compile through with
Ember's: `torch.compile`, `torch._dynamo.optimize`, `torch._dynamo.optimize_assert` and
`torch._dynamo.reset` (also the name `torch._dynamo.test_case` imported, which every
`TestCase.setUp`/`tearDown` calls). Tooling only: the conformance harness loads it; product code
never does.

Backends: the strings Ember knows under the same name go by that name; any other string is
resolved through PyTorch's backend registry to its callable (Dynamo's convention,
`backend(gm, example_inputs)`, which Ember's tracer follows); callables pass through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
import torch._dynamo.test_case

import ember

# Dynamo backend name -> Ember backend name
BACKEND_NAMES = {"eager": "eager", "aot_eager": "aot_eager", "inductor": "inductor"}

ORIGINAL: dict[str, Callable] = {}
CALLS = {"compile": 0}  # how many times a test reached Ember (a summary line shows it)


def ember_backend(backend: str | Callable | None) -> str | Callable:
    """The backend Ember is given for a Dynamo `backend=` argument."""
    if backend is None:
        return "inductor"
    if callable(backend):
        return backend
    if backend in BACKEND_NAMES:
        return BACKEND_NAMES[backend]
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(backend)


def compile(model: Callable | None = None, **kwargs: Any) -> Any:
    """torch.compile, compiled by Ember; arguments Ember has no counterpart for are dropped."""
    options = {
        "backend": ember_backend(kwargs.get("backend")),
        "fullgraph": kwargs.get("fullgraph", False),
        "dynamic": kwargs.get("dynamic"),
        "mode": kwargs.get("mode"),
        "options": kwargs.get("options"),
        "disable": kwargs.get("disable", False),
    }
    if model is None:
        return functools.partial(_ember_compile, **options)
    return _ember_compile(model, **options)


def _ember_compile(model: Callable, **options: Any) -> Any:
    CALLS["compile"] += 1
    return ember.compile(model, **options)


class _Optimize:
    """What torch._dynamo.optimize(...) returns: a decorator that compiles with Ember."""

    def __init__(self, backend: Any, fullgraph: bool, dynamic: bool | None, disable: bool):
        self.options = {
            "backend": ember_backend(backend),
            "fullgraph": fullgraph,
            "dynamic": dynamic,
            "disable": disable,
        }

    def __call__(self, fn: Callable) -> Any:
        return _ember_compile(fn, **self.options)


def optimize(backend: Any = "inductor", *, nopython: bool = False, **kwargs: Any) -> _Optimize:
    fullgraph = bool(nopython or kwargs.get("error_on_graph_break"))
    return _Optimize(backend, fullgraph, kwargs.get("dynamic"), kwargs.get("disable", False))


def optimize_assert(backend: Any = "inductor", **kwargs: Any) -> _Optimize:
    return _Optimize(backend, True, kwargs.get("dynamic"), False)


def reset() -> None:
    ember.reset()
    ORIGINAL["reset"]()


def install() -> None:
    if ORIGINAL:
        return
    ORIGINAL.update(
        compile=torch.compile,
        optimize=torch._dynamo.optimize,
        optimize_assert=torch._dynamo.optimize_assert,
        reset=torch._dynamo.reset,
    )
    torch.compile = compile
    torch._dynamo.optimize = optimize
    torch._dynamo.optimize_assert = optimize_assert
    torch._dynamo.reset = reset
    torch._dynamo.test_case.reset = reset


def pytest_configure(config: Any) -> None:
    """Runs before collection, so decorators at module level see Ember's entry points."""
    install()


def pytest_report_header(config: Any) -> str:
    return f"ember_redirect: torch.compile and torch._dynamo.optimize -> ember {ember.__version__}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"ember_redirect: {CALLS['compile']} calls compiled by Ember")
