"""A compile keeps none of the caller's values alive: once the caller drops its last
reference, a tensor or module handed to a compiled function is freed at once (by reference
counting, as in eager: no `gc.collect()` is asked for), not never."""

from __future__ import annotations

import gc
import weakref

import torch

from conftest import Compiled


def _freed_without_collection(make_args, fn) -> bool:
    compiled = Compiled(fn)
    args = make_args()
    refs = [weakref.ref(a) for a in args]
    compiled(*args)
    assert compiled.backend.graph_count == 1
    del args
    return all(r() is None for r in refs)


def test_inputs_of_the_compiling_call_are_freed_by_reference_counting():
    def fn(x, y):
        return (x * y).sum(0)

    assert _freed_without_collection(lambda: [torch.randn(4, 3), torch.randn(4, 3)], fn)


def test_a_module_argument_is_freed_after_the_compiling_call():
    def fn(mod, x):
        return mod(x).relu()

    mod = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    compiled = Compiled(fn)
    compiled(mod, x)
    mod_ref, x_ref = weakref.ref(mod), weakref.ref(x)
    del mod, x
    assert x_ref() is None
    del compiled  # its cached code and guards go with it
    gc.collect()
    assert mod_ref() is None
