"""The module that `ember.compile(module)` returns behaves as the module it wraps.

Every check compares the compiled module with the eager one it wraps, and every call checks
that it really ran compiled (graph counts), under a recording backend and under `inductor`.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ember
from conftest import RecordingBackend

x = torch.randn(4, 3)


class Scaled(nn.Module):
    """Takes another branch in training mode: a trace must follow `training`."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("offset", torch.ones(3))

    def forward(self, a):
        out = self.lin(a) + self.offset
        return out * 2 if self.training else out - 1


def _backends():
    return [RecordingBackend(), "inductor"]


def _graphs(backend) -> int:
    if isinstance(backend, RecordingBackend):
        return len(backend.graphs)
    return ember.counters["inductor"]["forward_graphs"]


def test_empty_container_is_falsy_and_has_no_length():
    eager = nn.ModuleList()
    compiled = ember.compile(eager)
    assert bool(compiled) is bool(eager) is False
    assert len(compiled) == len(eager) == 0
    assert list(compiled) == list(eager) == []
    eager.append(nn.ReLU())
    assert bool(compiled) is True and len(compiled) == 1


def test_module_without_length_is_truthy_and_len_raises_as_eager():
    eager = nn.Linear(3, 2)
    compiled = ember.compile(eager)
    assert bool(compiled) is bool(eager) is True
    with pytest.raises(TypeError):
        len(eager)
    with pytest.raises(TypeError):
        len(compiled)
    with pytest.raises(TypeError):
        iter(compiled)


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_sequential_iterates_indexes_and_runs_compiled(backend):
    eager = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    compiled = ember.compile(eager, backend=backend)
    assert len(compiled) == 3
    assert list(compiled) == list(eager)
    assert compiled[0] is eager[0] and compiled[-1] is eager[-1]
    assert type(compiled[1:]) is type(eager[1:]) and list(compiled[1:]) == list(eager[1:])
    assert eager[1] in compiled
    torch.testing.assert_close(compiled(x), eager(x))
    torch.testing.assert_close(compiled(x), eager(x))
    assert _graphs(backend) == 1


def test_module_dict_indexing_and_membership():
    eager = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Tanh()})
    compiled = ember.compile(eager)
    assert compiled["a"] is eager["a"]
    assert "b" in compiled and "c" not in compiled
    assert list(compiled) == list(eager) == ["a", "b"]
    assert len(compiled) == 2


def test_attribute_reads_writes_and_deletes_reach_the_module():
    eager = Scaled()
    compiled = ember.compile(eager)
    assert compiled.lin is eager.lin and compiled.offset is eager.offset
    compiled.note = "kept"
    assert eager.note == "kept" and compiled.note == "kept"
    del compiled.note
    assert not hasattr(eager, "note") and not hasattr(compiled, "note")
    compiled.extra = nn.Parameter(torch.zeros(2))  # registered on the module, as a parameter
    assert "extra" in dict(eager.named_parameters())
    compiled.lin = nn.Linear(3, 3)
    assert compiled.lin is eager.lin
    assert compiled._orig_mod is eager
    assert "lin" in dir(compiled) and "forward" in dir(compiled)
    with pytest.raises(AttributeError):
        compiled.missing  # noqa: B018


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_training_follows_the_module_both_ways(backend):
    eager = Scaled()
    compiled = ember.compile(eager, backend=backend)
    assert compiled.training is eager.training is True
    torch.testing.assert_close(compiled(x), eager(x))
    eager.eval()
    assert compiled.training is False
    torch.testing.assert_close(compiled(x), eager(x))  # the eval branch, not the cached one
    compiled.train()
    assert eager.training is True and eager.lin.training is True
    torch.testing.assert_close(compiled(x), eager(x))
    compiled.eval()
    assert eager.training is False and eager.lin.training is False
    torch.testing.assert_close(compiled(x), eager(x))
    assert _graphs(backend) == 2  # one per mode, reused on the way back


def test_state_dict_and_parameters_are_the_modules():
    eager = Scaled()
    compiled = ember.compile(eager)
    prefix = "_orig_mod."  # as torch.compile names them: checkpoints stay interchangeable
    state = compiled.state_dict()
    assert list(state) == [prefix + k for k in eager.state_dict()]
    for k, v in eager.state_dict().items():
        assert state[prefix + k].data_ptr() == v.data_ptr()
    named = dict(compiled.named_parameters())
    assert list(named) == [prefix + k for k, _ in eager.named_parameters()]
    assert all(named[prefix + k] is p for k, p in eager.named_parameters())
    assert list(compiled.parameters()) == list(eager.parameters())
    assert list(compiled.buffers()) == list(eager.buffers())

    fresh = {k: torch.full_like(v, 0.5) for k, v in state.items()}
    compiled.load_state_dict(fresh)
    assert torch.equal(eager.lin.weight, torch.full_like(eager.lin.weight, 0.5))
    assert torch.equal(eager.offset, torch.full((3,), 0.5))


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_hooks_on_the_original_module_still_run(backend):
    def with_hooks(model):
        model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        model.register_forward_hook(lambda m, args, out: out + 10)
        model.lin.register_forward_hook(lambda m, args, out: out * 3)
        return model

    eager = with_hooks(Scaled())
    model = Scaled()
    model.load_state_dict(eager.state_dict())
    compiled = ember.compile(with_hooks(model), backend=backend)
    torch.testing.assert_close(compiled(x), eager(x))
    first = _graphs(backend)
    torch.testing.assert_close(compiled(x), eager(x))
    assert first >= 1 and _graphs(backend) == first  # compiled once, reused


def test_repr_shows_the_module():
    eager = nn.Sequential(nn.Linear(3, 2))
    compiled = ember.compile(eager)
    assert repr(eager).replace("\n", "\n  ") in repr(compiled)
    assert repr(compiled).startswith("OptimizedModule(")


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_hooks_of_children_are_in_forwards_graph_own_hooks_run_around_it(backend):
    model = Scaled()
    model.register_forward_pre_hook(lambda m, args: (args[0] - 1,))  # a frame of its own
    model.lin.register_forward_hook(lambda m, args, out: out.sigmoid())  # in forward's graph
    compiled = ember.compile(model, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))
    assert _graphs(backend) == 2


def test_a_lazy_compiled_module_initialises_before_the_trace():
    torch.manual_seed(0)
    model = nn.LazyLinear(3)
    compiled = ember.compile(model, backend="inductor", fullgraph=True)
    got = compiled(x)
    assert type(model) is nn.Linear and model.weight.shape == (3, 3)
    torch.testing.assert_close(got, model(x))
    assert _graphs("inductor") == 1


def test_torch_save_and_load_compile_the_loaded_module_again(tmp_path):
    import copy

    model = Scaled()
    compiled = ember.compile(model, backend="inductor")
    expected = compiled(x)
    torch.save(compiled, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    assert type(loaded) is type(compiled) and loaded._orig_mod is not model
    ember.reset()  # nothing cached: the loaded module must compile itself
    torch.testing.assert_close(loaded(x), expected)
    assert _graphs("inductor") == 1
    twin = copy.deepcopy(compiled)
    torch.testing.assert_close(twin(x), model(x))
    assert twin._orig_mod is not model
    # a backend that cannot be pickled cannot be saved (as with torch.compile)
    import pickle

    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pickle.dumps(ember.compile(model, backend=lambda gm, inputs: gm.forward))


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_dropped_compiled_module_is_freed(backend):
    """After the user drops every reference to a compiled model (its class made in a
    function, a layer reached only through that class's closure), it is freed: the cache
    entry on its forward's code holds what its guards pin weakly (guards/weak_pins.py)."""
    import gc
    import weakref

    freed = []

    def run():
        layer = nn.Linear(3, 3)
        weakref.finalize(layer, freed.append, "layer")

        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.held = layer

            def forward(self, a):
                return self.held(a).sin()

        model = Holder()
        compiled = ember.compile(model, backend=backend)
        torch.testing.assert_close(compiled(x), model(x))
        assert _graphs(backend) == 1

    run()
    gc.collect()
    assert freed == ["layer"]


class Stepper(nn.Module):
    """A training framework's module: `training_step` is an entry point that calls self()."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, a):
        return self.lin(a).relu()

    def training_step(self, a):
        return (self(a) - a).square().mean()


@pytest.mark.parametrize("backend", _backends(), ids=["recording", "inductor"])
def test_compile_also_puts_the_modules_compile_on_its_other_entry_points(backend):
    # as a trainer does: the compiled module's compile applied to the plain module's forward
    # and training_step (a compiled function calling a compiled function), one compiler
    model = Stepper()
    compiled = ember.compile(model, backend=backend)
    model.forward = compiled.compile_also(model.forward)
    model.training_step = compiled.compile_also(model.training_step)
    for _ in range(2):
        got, expected = model.training_step(x), Stepper.training_step(model, x)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(model(x), Stepper.forward(model, x))
    assert _graphs(backend) == 2  # training_step's (forward inlined) and forward's own
    assert model.training_step._ember_compiler is compiled._ember_compiler
    assert isinstance(compiled.compile_also(nn.ReLU()), ember.OptimizedModule)
