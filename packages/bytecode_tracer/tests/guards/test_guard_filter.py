"""A user's guard filter (options={"guard_filter_fn": ...}): the entries it sees, what it drops."""

from __future__ import annotations

import pytest
import torch

from ember_bytecode_tracer.guards import (
    AttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    LocalSource,
    TorchStateSource,
)
from ember_bytecode_tracer.guards.filter import entries_for, filter_guards

SCALE = 3


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.c = 2


def _guards(block: Block) -> tuple[list[Guard], dict, dict]:
    f_locals = {"self": block, "y": None, "x": torch.ones(2)}
    f_globals = {"SCALE": SCALE}
    me = LocalSource("self")
    guards = [
        Guard.from_value(LocalSource("x"), GuardKind.TENSOR_MATCH, f_locals["x"]),
        Guard(LocalSource("y"), GuardKind.NONE_MATCH),
        Guard.from_value(GlobalSource("SCALE"), GuardKind.EQUALS_MATCH, SCALE),
        Guard.from_value(AttrSource(me, "c"), GuardKind.EQUALS_MATCH, 2),
        Guard.from_value(AttrSource(AttrSource(me, "norm"), "eps"), GuardKind.EQUALS_MATCH, 1e-5),
        Guard(TorchStateSource("grad_enabled"), GuardKind.EQUALS_MATCH, True),
    ]
    return guards, f_globals, f_locals


def test_entries_name_the_guarded_value_as_torch_compiles_filters_expect() -> None:
    guards, f_globals, f_locals = _guards(Block())
    entries = entries_for(guards, f_globals, f_locals)
    names = [e.name for e in entries]
    assert names[:5] == ["x", "y", "SCALE", "self.c", "self.norm.eps"]
    x, y, scale, c, eps, grad = entries
    assert x.guard_type == "TENSOR_MATCH" and x.value is f_locals["x"] and not x.is_global
    assert y.has_value and y.value is None
    assert scale.is_global and scale.value == SCALE
    assert grad.guard_type == "GLOBAL_STATE" and not grad.has_value
    # reached through a module: the user's (Block) for self.c, torch.nn's own for norm.eps
    assert c.orig_guard.source.is_unspecialized_nn_module()
    assert not c.orig_guard.source.is_unspecialized_builtin_nn_module()
    assert eps.orig_guard.source.is_unspecialized_builtin_nn_module()
    assert not x.orig_guard.source.is_unspecialized_nn_module()


def test_torch_compilers_own_filter_helpers_pick_the_same_guards() -> None:
    guards, f_globals, f_locals = _guards(Block())
    kept = filter_guards(
        guards, torch.compiler.skip_guard_on_inbuilt_nn_modules_unsafe, f_globals, f_locals
    )
    assert [g.source.shown() for g in kept if "eps" in g.source.shown()] == []
    assert len(kept) == len(guards) - 1
    kept = filter_guards(guards, torch.compiler.skip_guard_on_globals_unsafe, f_globals, f_locals)
    assert GlobalSource("SCALE") not in [g.source for g in kept]
    kept = filter_guards(guards, torch.compiler.keep_tensor_guards_unsafe, f_globals, f_locals)
    assert [g.kind for g in kept] == [GuardKind.TENSOR_MATCH]


def test_a_filter_must_answer_every_entry() -> None:
    guards, f_globals, f_locals = _guards(Block())
    with pytest.raises(TypeError, match="one truth value per entry"):
        filter_guards(guards, lambda entries: [True], f_globals, f_locals)
