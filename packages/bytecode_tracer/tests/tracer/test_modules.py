"""nn.Module calls inline forward with parameters as graph inputs."""

from __future__ import annotations

import torch
from torch import nn

from conftest import Compiled, same


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(8, 2))
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(self.drop(x))


def test_module_forward_is_one_graph_with_parameters_as_inputs():
    model = MLP().eval()
    x = torch.randn(4, 8)
    compiled = Compiled(model)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1
    ops = compiled.backend.ops(0)
    assert ops.count("linear") == 4 and ops.count("relu") == 4
    placeholders = [n for n in compiled.backend.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1 + 8  # input + 4 weights + 4 biases


def test_train_eval_switch_recompiles():
    model = MLP()
    x = torch.randn(4, 8)
    compiled = Compiled(model)
    model.eval()
    first = compiled(x)
    assert same(first, model(x))
    model.train()
    torch.manual_seed(0)
    got = compiled(x)
    torch.manual_seed(0)
    assert same(got, model(x))
    assert compiled.backend.graph_count == 2


def test_other_instance_of_same_class_reuses_the_trace():
    # A module passed in is guarded by type, its parameters by metadata: a second Linear
    # of the same shapes runs the same trace with its own weights.
    x = torch.randn(4, 8)
    a, b = nn.Linear(8, 3), nn.Linear(8, 3)
    compiled_a, compiled_b = Compiled(a), Compiled(b)
    compiled_b.compiler = compiled_a.compiler  # same callback, same cache
    compiled_b.backend = compiled_a.backend
    assert same(compiled_a(x), a(x))
    assert same(compiled_b(x), b(x))
    assert compiled_a.backend.graph_count == 1


def test_parameter_update_is_seen_without_recompiling():
    model = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    compiled = Compiled(model)
    compiled(x)
    with torch.no_grad():
        model.weight.mul_(2)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1


def test_replacing_a_submodule_recompiles():
    model = MLP().eval()
    x = torch.randn(4, 8)
    compiled = Compiled(model)
    compiled(x)
    model.head = nn.Sequential(nn.Tanh(), nn.Linear(8, 2))
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 2


def test_forward_hook_added_later_is_honoured():
    model = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    compiled = Compiled(model)
    compiled(x)
    calls = []
    model.register_forward_hook(lambda mod, inp, out: calls.append(1))
    compiled(x)
    assert calls == [1]


def test_module_dict_and_parameters_listing():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})

        def forward(self, x):
            for _name, block in self.blocks.items():
                x = block(x)
            return x + sum(p.sum() for p in self.parameters()) * 0

    net = Net()
    x = torch.randn(2, 4)
    compiled = Compiled(net)
    assert same(compiled(x), net(x))


def test_training_step_gradients_match():
    torch.manual_seed(0)
    model = MLP().eval()
    reference = MLP().eval()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 8)
    compiled = Compiled(lambda m, t: m(t).pow(2).mean())
    compiled(model, x).backward()
    reference(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_layers_of_the_same_class_share_one_compiled_frame():
    """Each block runs as its own frame (a break in the container's loop); blocks of one
    class reuse a single trace instead of recompiling per instance."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(12)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
                print(end="")  # a graph break inside the loop: blocks run as frames
            return x

    model = Stack()
    x = torch.randn(2, 4)
    compiled = Compiled(model)
    assert same(compiled(x), model(x))
    block_graphs = [g for g in compiled.backend.graphs if "relu" in g.code]
    # Block 0 sees the input (requires_grad=False), blocks 1-11 see outputs that require
    # grad: two variants, not twelve.
    assert len(block_graphs) == 2


def test_growing_a_module_list_recompiles():
    model = MLP().eval()
    x = torch.randn(4, 8)
    compiled = Compiled(model)
    compiled(x)
    model.layers.append(nn.Linear(8, 8))
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 2


def test_slicing_a_module_list():
    model = MLP().eval()

    def fn(m, x):
        for layer in m.layers[1:]:
            x = layer(x)
        return x

    x = torch.randn(2, 8)
    compiled = Compiled(fn)
    assert same(compiled(model, x), fn(model, x))
    assert compiled.backend.graph_count == 1


def test_building_a_parameter_free_torch_module_in_forward():
    def fn(logits, target):
        loss_fn = nn.CrossEntropyLoss(reduction="sum")
        return loss_fn(logits, target) + nn.ReLU()(logits).sum()

    logits, target = torch.randn(4, 3), torch.tensor([0, 2, 1, 0])
    compiled = Compiled(fn)
    assert same(compiled(logits, target), fn(logits, target))
    assert compiled.backend.graph_count == 1


def test_method_from_a_module_registered_under_another_name():
    # collections.abc.Mapping.get lives in _collections_abc, which calls itself collections.abc.
    import collections.abc

    class Table(collections.abc.Mapping):
        def __init__(self, scale):
            self.data = {"scale": scale}

        def __getitem__(self, key):
            return self.data[key]

        def __iter__(self):
            return iter(self.data)

        def __len__(self):
            return 1

    table = Table(3.0)
    x = torch.randn(2)
    compiled = Compiled(lambda t, x: x * t.get("scale", 1.0))
    assert same(compiled(table, x), x * 3.0)
    assert compiled.backend.graph_count == 1


class _Parameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])
        self.shifts = nn.ParameterDict({"a": nn.Parameter(torch.randn(4)), "b-c": nn.Parameter(torch.randn(4))})  # fmt: skip

    def forward(self, x):
        for scale in self.scales:
            x = x * scale
        x = x + self.scales[-1] * len(self.scales) + self.shifts["b-c"]
        for _key, shift in self.shifts.items():
            x = x + shift
        for key in self.shifts:
            x = x - self.shifts[key]
        return x + sum(self.shifts.values()) + len(self.shifts)


def test_parameter_list_and_dict_are_read_in_one_graph_and_guarded():
    net = _Parameters()
    x = torch.randn(2, 4)
    compiled = Compiled(net)
    assert same(compiled(x), net(x))
    assert compiled.backend.graph_count == 1
    assert compiled.backend.ops(0).count("mul") >= 4
    # another length, another key, a replaced entry: each re-traced, each right
    net.scales.append(nn.Parameter(torch.randn(4)))
    assert same(compiled(x), net(x))
    net.shifts["e"] = nn.Parameter(torch.randn(4))
    assert same(compiled(x), net(x))
    net.scales[0] = nn.Parameter(torch.randn(4))
    assert same(compiled(x), net(x))
    with torch.no_grad():  # an update in place: the same graph reads the new values
        net.scales[1].mul_(3)
    assert same(compiled(x), net(x))
    assert compiled.backend.graph_count == 3
