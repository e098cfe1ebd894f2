"""Bugs found by the tracer fuzzer (tools/fuzz_tracer.py), each as its minimized program."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


def test_loop_over_a_list_sees_items_the_body_assigns():
    def f(x, items):
        for v in items:
            items[-1] = items[-1] + 1
            x = x + v
        return x

    def args():
        return torch.ones(2), [torch.ones(2), torch.ones(2)]

    compiled = Compiled(f)
    expected_args, got_args = args(), args()
    assert same(compiled(*got_args), f(*expected_args))
    assert same(got_args, expected_args)
    assert compiled.backend.graph_count == 1


def test_loop_over_dict_items_reads_values_the_body_writes():
    def f(x, d):
        acc = x
        for _k, v in d.items():
            d["q"] = v * 3
            acc = acc + v
        return acc

    def args():
        return torch.ones(2), {"p": torch.ones(2), "q": torch.zeros(2)}

    compiled = Compiled(f)
    expected_args, got_args = args(), args()
    assert same(compiled(*got_args), f(*expected_args))
    assert same(got_args, expected_args)
    assert compiled.backend.graph_count == 1


def test_dict_changing_size_in_its_loop_raises_as_in_eager():
    def f(x, d):
        for _k, _v in d.items():
            d.pop("q", None)
        return x + 1

    def args():
        return torch.ones(2), {"p": torch.ones(2), "q": torch.zeros(2)}

    with pytest.raises(RuntimeError, match="changed size"):
        f(*args())
    with pytest.raises(RuntimeError, match="changed size"):
        Compiled(f)(*args())


def test_keys_values_and_items_are_still_lists_of_the_dict():
    def f(x, d):
        keys = list(d.keys())
        total = sum(d.values())
        pairs = [k for k, _ in d.items()]
        return x * total, keys, pairs

    d = {"a": torch.ones(2), "b": torch.full((2,), 2.0)}
    compiled = Compiled(f, fullgraph=True)
    assert same(compiled(torch.ones(2), d), f(torch.ones(2), d))
    assert compiled.backend.graph_count == 1
