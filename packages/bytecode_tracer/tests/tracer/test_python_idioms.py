"""Python idioms users write, traced in one graph and compared with eager (tracer only;
integration_tests/test_python_idioms.py runs the larger corpus through ember.compile)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


def test_keyword_arguments_to_folded_torch_functions():
    def fn(y):
        if torch.is_floating_point(input=y) and not torch.is_complex(input=y):
            return y * torch.numel(input=y)
        return y

    compiled = Compiled(fn, fullgraph=True)
    for y in (torch.randn(3), torch.arange(3)):
        assert same(compiled(y), fn(y))
    assert compiled.backend.graph_count == 1  # the int input needs no graph op


def test_bad_keyword_to_a_folded_function_raises_as_eager():
    def fn(y):
        return torch.is_tensor(obj=y)

    with pytest.raises(TypeError):
        fn(torch.ones(1))
    with pytest.raises(TypeError):
        Compiled(fn)(torch.ones(1))
