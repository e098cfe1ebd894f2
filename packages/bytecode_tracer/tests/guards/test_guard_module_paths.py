"""nn.Module attributes are read through their fast physical path only when that is exact."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ember_bytecode_tracer.guards import (
    AttrSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    compile_guards,
)

SELF = LocalSource("self")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 2)])
        self.register_buffer("scale", torch.ones(2))


def net_guards(net: Net, *, pin_types: bool = True) -> list[Guard]:
    fc, layers = AttrSource(SELF, "fc"), AttrSource(SELF, "layers")
    guards = [
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, net),
        Guard.from_value(SELF, GuardKind.MODULE_TRAINING, net),
        Guard.from_value(layers, GuardKind.LEN_MATCH, net.layers),
        Guard.from_value(AttrSource(fc, "weight"), GuardKind.TENSOR_MATCH, net.fc.weight),
        Guard.from_value(AttrSource(SELF, "scale"), GuardKind.TENSOR_MATCH, net.scale),
    ]
    for i, layer in enumerate(net.layers):
        weight = AttrSource(ItemSource(layers, i), "weight")
        guards.append(Guard.from_value(weight, GuardKind.TENSOR_MATCH, layer.weight))
    if pin_types:
        guards.append(Guard.from_value(fc, GuardKind.TYPE_MATCH, net.fc))
        for i, layer in enumerate(net.layers):
            guards.append(Guard.from_value(ItemSource(layers, i), GuardKind.TYPE_MATCH, layer))
    return guards


def statements(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not line.strip().startswith("#"))


def test_fast_paths_are_used_and_agree() -> None:
    net = Net()
    compiled = compile_guards(net_guards(net), {}, f_locals={"self": net})
    code = statements(compiled.source_code)
    assert "._parameters['weight']" in code
    assert "._buffers['scale']" in code
    assert "_modules['layers']" in code and "_modules['0']" in code
    assert ".weight" not in code
    assert compiled({"self": net})
    assert compiled({"self": Net()})
    slow = compile_guards(net_guards(net), {})  # no example locals: semantic reads only
    assert "._parameters" not in statements(slow.source_code)
    assert slow({"self": net})


def test_fast_paths_follow_module_changes() -> None:
    net = Net()
    compiled = compile_guards(net_guards(net), {}, f_locals={"self": net})
    cases: list[Any] = [
        lambda n: setattr(n.fc, "weight", nn.Parameter(torch.randn(4, 5))),
        lambda n: n.fc.weight.requires_grad_(False),
        lambda n: setattr(n.fc, "weight", None),
        lambda n: delattr(n.fc, "weight"),
        lambda n: n.layers.append(nn.Linear(2, 2)),
        lambda n: n.layers.__delitem__(0),
        lambda n: n.layers.insert(0, nn.Linear(4, 4)),
        lambda n: setattr(n, "scale", torch.ones(3)),
        lambda n: setattr(n, "fc", nn.Identity()),
        lambda n: n.eval(),
    ]
    for change in cases:
        fresh = Net()
        assert compiled({"self": fresh})
        change(fresh)
        assert not compiled({"self": fresh}), change
        assert compiled.failure_reason({"self": fresh}) is not None


def test_no_fast_path_without_a_pinned_type() -> None:
    net = Net()
    compiled = compile_guards(net_guards(net, pin_types=False), {}, f_locals={"self": net})
    code = statements(compiled.source_code)
    assert "['fc'].weight" in code, "fc's class is not guarded: read it the semantic way"
    assert "_modules['0'].weight" in code, "the ModuleList's class is pinned by LEN_MATCH"


class Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(2, 2)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            return nn.Linear(3, 3)
        return super().__getattr__(name)


class WithProperty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(2))

    @property
    def scaled(self) -> torch.Tensor:
        return self.w * 2


def test_no_fast_path_when_lookup_is_customized() -> None:
    custom = Custom()
    guards = [
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, custom),
        Guard.from_value(AttrSource(AttrSource(SELF, "inner"), "weight"), GuardKind.NOT_NONE, 1),
        Guard.from_value(AttrSource(SELF, "inner"), GuardKind.TYPE_MATCH, custom.inner),
    ]
    compiled = compile_guards(guards, {}, f_locals={"self": custom})
    assert "_modules" not in statements(compiled.source_code)
    prop = WithProperty()
    guard = Guard(AttrSource(SELF, "scaled"), GuardKind.NOT_NONE)
    pinned = Guard.from_value(SELF, GuardKind.TYPE_MATCH, prop)
    code = statements(compile_guards([guard, pinned], {}, f_locals={"self": prop}).source_code)
    assert ".scaled" in code


def test_id_match_pins_a_global_module() -> None:
    net = Net()
    source = AttrSource(AttrSource(LocalSource("m"), "fc"), "bias")
    guards = [
        Guard.from_value(LocalSource("m"), GuardKind.ID_MATCH, net),
        Guard.from_value(AttrSource(LocalSource("m"), "fc"), GuardKind.ID_MATCH, net.fc),
        Guard.from_value(source, GuardKind.TENSOR_MATCH, net.fc.bias),
    ]
    compiled = compile_guards(guards, {})  # the ID_MATCH objects stand in for f_locals
    assert "._parameters['bias']" in compiled.source_code
    assert compiled({"m": net})
    assert not compiled({"m": Net()})


def test_instance_dict_shadowing_is_not_rewritten() -> None:
    net = Net()
    object.__setattr__(net.fc, "extra", torch.randn(1))
    source = AttrSource(AttrSource(SELF, "fc"), "extra")
    guards = [
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, net),
        Guard.from_value(AttrSource(SELF, "fc"), GuardKind.TYPE_MATCH, net.fc),
        Guard.from_value(source, GuardKind.TENSOR_MATCH, net.fc.extra),
    ]
    compiled = compile_guards(guards, {}, f_locals={"self": net})
    assert ".extra" in statements(compiled.source_code)
    assert compiled({"self": net})


def test_module_dict_items() -> None:
    heads = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 3)})
    source = AttrSource(ItemSource(LocalSource("heads"), "b"), "bias")
    guards = [
        Guard.from_value(
            AttrSource(LocalSource("heads"), "_modules"), GuardKind.DICT_KEYS, heads._modules
        ),
        Guard.from_value(LocalSource("heads"), GuardKind.TYPE_MATCH, heads),
        Guard.from_value(ItemSource(LocalSource("heads"), "b"), GuardKind.TYPE_MATCH, heads["b"]),
        Guard.from_value(source, GuardKind.TENSOR_MATCH, heads["b"].bias),
    ]
    compiled = compile_guards(guards, {}, f_locals={"heads": heads})
    assert "_modules['b']" in compiled.source_code
    assert "_parameters['bias']" in compiled.source_code
    assert compiled({"heads": heads})
    heads["b"] = nn.Linear(2, 4)
    assert not compiled({"heads": heads})
    del heads["b"]
    assert not compiled({"heads": heads})


def test_input_loader_reads_physical_paths_and_shared_prefixes_once() -> None:
    from ember_bytecode_tracer.guards import compile_source_loader

    net = Net()
    layers = AttrSource(SELF, "layers")
    sources = [
        AttrSource(AttrSource(SELF, "fc"), "weight"),
        AttrSource(ItemSource(layers, 0), "weight"),
        AttrSource(ItemSource(layers, 1), "weight"),
        AttrSource(SELF, "scale"),
    ]
    load = compile_source_loader(sources, net_guards(net), {}, f_locals={"self": net})
    values = load({"self": net})
    expected = [net.fc.weight, net.layers[0].weight, net.layers[1].weight, net.scale]
    assert all(v is e for v, e in zip(values, expected, strict=True))
    code = load.source_code
    assert "._parameters['weight']" in code and ".weight" not in code
    assert code.count("_modules['layers']") == 1  # the shared prefix is bound once
    unpinned = compile_source_loader(sources, net_guards(net, pin_types=False), {})
    assert all(v is e for v, e in zip(unpinned({"self": net}), expected, strict=True))


def sequential_guards(seq: nn.Sequential, *, pin_keys: bool) -> list[Guard]:
    guards = [Guard.from_value(SELF, GuardKind.TYPE_MATCH, seq)]
    if pin_keys:
        guards.append(
            Guard.from_value(AttrSource(SELF, "_modules"), GuardKind.DICT_KEYS, seq._modules)
        )
    for i, layer in enumerate(seq):
        weight = AttrSource(ItemSource(SELF, i), "weight")
        guards.append(Guard.from_value(ItemSource(SELF, i), GuardKind.TYPE_MATCH, layer))
        guards.append(Guard.from_value(weight, GuardKind.TENSOR_MATCH, layer.weight))
    return guards


def test_a_sequential_item_is_a_dict_read_where_its_keys_are_pinned() -> None:
    from collections import OrderedDict

    seq = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    compiled = compile_guards(sequential_guards(seq, pin_keys=True), {}, f_locals={"self": seq})
    code = statements(compiled.source_code)
    assert "_modules['1']" in code and "v_self[1]" not in code
    assert compiled({"self": seq})
    # named children: position 1 is the key 'b' (the guard pinned those keys)
    named = nn.Sequential(OrderedDict(a=nn.Linear(3, 4), b=nn.Linear(4, 2)))
    by_name = compile_guards(sequential_guards(named, pin_keys=True), {}, f_locals={"self": named})
    assert "_modules['b']" in statements(by_name.source_code)
    assert by_name({"self": named})
    # reordered, renamed or shortened: the pinned keys no longer hold
    swapped = nn.Sequential(OrderedDict([("1", nn.Linear(4, 2)), ("0", nn.Linear(3, 4))]))
    assert not compiled({"self": swapped})
    shorter = nn.Sequential(nn.Linear(3, 4))
    assert not compiled({"self": shorter})
    # without pinned keys the item is read through Sequential.__getitem__
    unpinned = compile_guards(sequential_guards(seq, pin_keys=False), {}, f_locals={"self": seq})
    assert "v_self[1]" in statements(unpinned.source_code)
    assert unpinned({"self": seq}) and not unpinned({"self": swapped})
