"""Variants keyed by which inputs share a storage (aliasing.py): a function writing `w`
and reading `t1`, a view of w passed as another input, sees the write through t1 whether
the first call aliased them or not, and in symbolic variants too (fuzz 2026:3725: t1 kept
its old value, silently)."""

from __future__ import annotations

import torch
from test_symbolic import Compilers, es, symbolic_graph

from ember_aot_autograd import aot_function, aot_module
from ember_aot_autograd.aliasing import alias_pattern


def _write_then_read(w, t1):
    w.add_(w.tanh())
    return t1 * 2


def _args(n: int, alias: bool):
    torch.manual_seed(n)
    w = torch.randn(n)
    t1 = w[1:3] if alias else w[1:3].clone()
    return w, t1


def _check(compiled, n: int, alias: bool) -> None:
    want_args, got_args = _args(n, alias), _args(n, alias)
    want = _write_then_read(*want_args)
    got = compiled(*got_args)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_args[0], want_args[0])


def test_alias_pattern_names_inputs_sharing_a_storage():
    w = torch.randn(4)
    assert alias_pattern([w, w.clone(), 3]) is None
    assert alias_pattern([w, 3, w[1:], w.detach(), torch.randn(2)]) == ((2, 0), (3, 0))


def test_static_variants_follow_each_calls_aliasing():
    fw = Compilers()
    compiled = aot_function(_write_then_read, fw)
    with torch.no_grad():
        for alias in (False, True, False, True):
            _check(compiled, 4, alias)
    assert len(fw.graphs) == 2  # one variant per aliasing


def test_symbolic_variant_runs_aliased_calls_on_their_own_tensors():
    example = _args(4, alias=False)
    gm, _env = symbolic_graph(_write_then_read, list(example), [{0: es.Dim()}, {}])
    fw = Compilers()
    with torch.no_grad():
        compiled = aot_module(gm, list(example), fw)
        for n, alias in ((4, False), (5, True), (6, False), (7, True), (5, True)):
            _check(compiled, n, alias)
    # the symbolic variant, then a static one per size of the aliased calls
    assert len(fw.graphs) == 3


def test_sharing_check_agrees_with_alias_pattern():
    from ember_aot_autograd.aliasing import SharingCheck

    w, v = torch.randn(4), torch.randn(3)
    fresh = SharingCheck([w, 3, v, torch.randn(2)], None)
    assert fresh.positions == (0, 2, 3)
    assert fresh([torch.randn(4), 5, torch.randn(3), torch.randn(2)])
    assert not fresh([w, 5, w[1:], torch.randn(2)])  # a view of the first
    assert not fresh([w, 5, torch.randn(3), w.detach()])  # another tensor, same storage
    # an input the guards would not let through (not a tensor): the full comparison
    assert fresh([w, 5, torch.randn(3), 7])
    shared = SharingCheck([w, w[1:]], ((1, 0),))
    assert shared([v, v[2:]]) and not shared([v, torch.randn(2)])
