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


def test_a_catch_warnings_block_around_ops_is_one_graph():
    def fn(x):
        with warnings.catch_warnings():
            y = x.cos()
        with warnings.catch_warnings(record=True):
            return y.sin() + 1

    filters = list(warnings.filters)
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    assert warnings.filters == filters  # the block left nothing behind


def test_what_a_catch_warnings_block_would_change_breaks():
    def reads_the_record(x):
        with warnings.catch_warnings(record=True) as caught:
            y = x.cos()
        return y + len(caught)  # eager's list holds what the ops warned

    def warns_inside(x):
        with warnings.catch_warnings():
            warnings.warn("inside the block", stacklevel=1)
            return x.cos()

    x = torch.randn(3)
    for fn in (reads_the_record, warns_inside):
        compiled = Compiled(fn)
        got, caught = _warnings_of(compiled, x)
        want, want_caught = _warnings_of(fn, x)
        assert same(got, want) and len(caught) == len(want_caught)
        assert compiled.breaks or compiled.compiler.skipped


def test_a_catch_warnings_object_made_but_not_entered_is_made_again_each_call():
    def fn(x):
        return x * 2, warnings.catch_warnings(record=True)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    (a, first), (_, second) = compiled(x), compiled(x)
    assert same(a, x * 2)
    assert isinstance(first, warnings.catch_warnings) and first is not second
    with first as caught:  # a fresh, usable one
        warnings.simplefilter("always")
        warnings.warn("recorded", stacklevel=1)
    assert [str(w.message) for w in caught] == ["recorded"]
