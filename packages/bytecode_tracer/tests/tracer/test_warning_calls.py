"""`warnings.warn` in traced code (issue 26): made after the graph on every call, at the
location eager gives it (the frame `stacklevel` names), in one graph; arguments that are
not constants, or a stacklevel past the compiled frame, are a break, never a lost warning."""

import warnings

import pytest
import torch

from conftest import Compiled, same


def _old_helper(x):
    warnings.warn("use the new helper", FutureWarning, stacklevel=2)
    return x + 1


def _warnings_of(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def test_a_warning_is_given_each_call_where_eager_gives_it():
    def fn(x):
        warnings.warn("checking", stacklevel=1)
        return _old_helper(x) * 2

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    want_result, want = _warnings_of(fn, x)
    for _ in range(2):  # the second call runs the cached graph: it warns again
        got_result, got = _warnings_of(compiled, x)
        assert same(got_result, want_result)
        assert got == want
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_filters_and_the_once_registry_are_consulted_when_the_call_is_made():
    def fn(x):
        warnings.warn("only once here", UserWarning, stacklevel=1)
        return x.sin()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        compiled(x)
        assert caught == []
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="only once here"):
            compiled(x)


def test_a_warning_of_a_tensor_value_breaks_the_graph():
    def fn(x):
        warnings.warn(f"value {x.sum()}", stacklevel=1)
        return x + 1

    compiled = Compiled(fn)
    x = torch.randn(3)
    got, caught = _warnings_of(compiled, x)
    assert same(got, x + 1) and len(caught) == 1
    assert compiled.breaks or compiled.compiler.skipped
