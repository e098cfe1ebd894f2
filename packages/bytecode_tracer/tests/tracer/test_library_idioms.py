"""Idioms of model libraries (HuggingFace transformers) that must not break graphs."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections import OrderedDict

import pytest
import torch

from conftest import Compiled, same

x = torch.randn(4, 3)


def test_is_compiling_is_true_inside_a_trace():
    def fn(a):
        if torch.compiler.is_compiling():
            return a * 2
        return a * 3

    compiled = Compiled(fn)
    assert same(compiled(x), x * 2)
    assert fn(x).equal(x * 3)  # eager says False
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_skipping_a_data_dependent_shortcut_under_compile_keeps_one_graph():
    def maybe_mask(mask):
        # the HF pattern: an all-ones mask is dropped in eager, kept when compiling
        if not torch.compiler.is_compiling() and mask.all():
            return None
        return mask

    def fn(a, mask):
        m = maybe_mask(mask)
        return a if m is None else a * m

    compiled = Compiled(fn)
    mask = torch.ones(4, 3)
    assert same(compiled(x, mask), fn(x, mask))
    assert not compiled.breaks


def test_tensor_ops_inside_try_finally_stay_in_the_graph():
    state = {"depth": 0}

    def fn(a):
        state["depth"] += 1
        try:
            return a.sin() + 1
        finally:
            state["depth"] -= 1

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert state["depth"] == 0
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_error_inside_try_finally_reaches_the_caller():
    def fn(ids, table):
        try:
            return table[ids] * 2  # out of range only at run time
        finally:
            pass

    table = torch.randn(5)
    compiled = Compiled(fn)
    assert same(compiled(torch.tensor([1]), table), fn(torch.tensor([1]), table))
    with pytest.raises(IndexError):
        compiled(torch.tensor([9]), table)


def test_try_except_still_keeps_tensor_ops_out_of_graphs():
    def fn(ids, table):
        try:
            return table[ids] * 2
        except IndexError:
            return torch.zeros(1)

    table = torch.randn(5)
    compiled = Compiled(fn)
    assert same(compiled(torch.tensor([7]), table), torch.zeros(1))


def test_callable_all_and_any_over_a_generator_fold():
    def combine(*fns):
        if not all(callable(f) for f in fns):
            raise RuntimeError("not callable")
        if callable(fns[0](torch.ones(1))):  # a tensor is not callable
            raise RuntimeError("tensor callable")
        if any(f is None for f in fns):
            raise RuntimeError("none")

        def combined(t):
            for f in fns:
                t = f(t)
            return t

        return combined

    def fn(a):
        return combine(lambda t: t + 1, torch.sin, functools.partial(torch.mul, other=2.0))(a)

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert not compiled.breaks


def test_any_on_a_tensor_item_breaks():
    def fn(a):
        b = a + 1
        if any(t.sum() > 0 for t in (b, -b)):
            return b * 2
        return b

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert compiled.breaks or compiled.compiler.skipped  # a tensor's truth is data


def test_inspect_signature_of_a_known_method_is_a_constant():
    class Block(torch.nn.Module):
        def chunk(self, hidden):
            return hidden.relu()

        def forward(self, hidden):
            count = len(inspect.signature(self.chunk).parameters)
            names = list(inspect.signature(lambda p, q=1: p).parameters)
            return self.chunk(hidden) * count + len(names)

    model = Block()
    compiled = Compiled(model)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


# A stand-in for transformers' ModelOutput (the tracer recognises the base by module/name).
class ModelOutput(OrderedDict):
    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                self[f.name] = value

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())

    # as transformers': both writes set the dict entry and the attribute, but an attribute
    # write sets the entry only for a field and a value that is not None
    def __setattr__(self, name, value):
        if value is not None and name in {f.name for f in dataclasses.fields(self)}:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


ModelOutput.__module__ = "transformers.utils.generic"


@dataclasses.dataclass
class BlockOutput(ModelOutput):
    hidden: torch.Tensor | None = None
    attentions: torch.Tensor | None = None
    cache: tuple | None = None


def test_model_outputs_built_in_the_trace_read_like_eager():
    def fn(a):
        out = BlockOutput(hidden=a * 2, cache=(a + 1,))
        first = out[0]
        by_key = out["cache"][0]
        missing = out.attentions
        return first + by_key + (0 if missing is None else missing), len(out), out.to_tuple()

    compiled = Compiled(fn)
    got, want = compiled(x), fn(x)
    assert same(got[0], want[0]) and got[1] == want[1] == 2
    assert len(got[2]) == len(want[2]) == 2
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_model_output_returned_from_a_graph_is_the_real_class():
    def fn(a):
        return BlockOutput(hidden=a.cos())

    compiled = Compiled(fn)
    out = compiled(x)
    assert type(out) is BlockOutput and list(out.keys()) == ["hidden"]
    assert same(out.hidden, x.cos())


def _keyed_view(out):
    return list(out.keys()), out.to_tuple(), out.hidden, out.attentions, out.extra


def test_model_output_writes_in_the_trace_keep_eagers_entries_and_attributes():
    def fn(a):
        out = BlockOutput(hidden=a * 2, cache=(a + 1,))
        out["extra"] = a.sin()  # a key that is no field: appended, and an attribute
        out.attentions = a.cos()  # a field set late: appended after "extra"
        out.hidden = None  # the attribute only: the entry keeps the tensor
        out["cache"] = (a - 1,)  # an existing key keeps its place
        return out, _keyed_view(out), out["hidden"] * 3, out[2]

    compiled = Compiled(fn, fullgraph=True)
    got, want = compiled(x), fn(x)
    assert type(got[0]) is BlockOutput
    assert (
        same(_keyed_view(got[0]), _keyed_view(want[0]))
        and vars(got[0]).keys() == vars(want[0]).keys()
    )
    assert same(got[1:], want[1:])
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_real_transformers_model_output():
    outputs = pytest.importorskip("transformers.modeling_outputs")

    def fn(a):
        out = outputs.BaseModelOutputWithPast(last_hidden_state=a.tanh(), past_key_values=None)
        return out.last_hidden_state * 2, out[0], out.to_tuple()

    compiled = Compiled(fn)
    got, want = compiled(x), fn(x)
    assert same(got[0], want[0]) and same(got[1], want[1]) and len(got[2]) == len(want[2])
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_module_handed_to_a_functional_loss_is_traced_where_it_is_called():
    # F.triplet_margin_with_distance_loss(..., distance_function=module): the Python-level
    # function is inlined so the module's forward is traced, not put in the graph as an object
    import torch.nn.functional as F

    def loss(a, p, n, fn):
        return F.triplet_margin_with_distance_loss(a, p, n, distance_function=fn)

    a, p, n = (torch.randn(5, 10) for _ in range(3))
    for fn in (torch.nn.PairwiseDistance(), lambda u, v: (u - v).abs().sum(-1)):
        compiled = Compiled(loss)
        assert same(compiled(a, p, n, fn), loss(a, p, n, fn))
        assert compiled.backend.graph_count == 1 and not compiled.breaks
