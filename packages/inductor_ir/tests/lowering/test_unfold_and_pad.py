"""unfold is an index map (no fallback kernel); a pad that only crops reads unmasked."""

import pytest
import torch

from ember_inductor_ir import PrinterHandler
from ember_primops import prims


def test_unfold_is_a_view_and_matches_eager(check):
    def f(a):
        windows = prims.unfold(prims.unfold(prims.exp(a), 2, 3, 2), 3, 2, 1)
        return (prims.amax(windows, [4, 5]), prims.add(windows, windows))

    lowering, _ = check(f, torch.randn(2, 3, 9, 6))
    assert not lowering.fallback_counts


def test_unfold_as_an_extern_argument_is_a_strided_view(check):
    def f(a, b):
        windows = prims.collapse(prims.unfold(prims.exp(a), 0, 4, 4), 0, 2)
        return (prims.mm(prims.reshape(windows, [4, 4]), b),)

    check(f, torch.randn(16), torch.randn(4, 3), atol=1e-5, rtol=1e-5)


def test_pad_that_only_crops_has_no_mask(check):
    def f(a):
        return (prims.pad(a, float("-inf"), [0, 0], [0, -1], [0, 0]),)

    _, sched = check(f, torch.randn(4, 7))
    printer = PrinterHandler()
    sched[0].nodes[0].run(printer)
    assert not any("masked" in line for line in printer.lines), printer.lines


def test_pad_that_pads_still_masks(check):
    def f(a):
        return (prims.pad(a, 0.0, [1, 0], [0, 2], [0, 0]),)

    _, sched = check(f, torch.randn(4, 7))
    printer = PrinterHandler()
    sched[0].nodes[0].run(printer)
    assert any("masked" in line for line in printer.lines)


def _pool_of_exp(reductions):
    def f(a):
        windows = prims.unfold(prims.unfold(prims.exp(a), 1, 2, 2), 2, 2, 2)
        return tuple(op(windows, [3, 4]) for op in reductions)

    return f


def test_one_reader_of_pooling_windows_computes_its_input_inline(check):
    lowering, _ = check(_pool_of_exp([prims.amax]), torch.randn(3, 8, 6))
    assert len(lowering.operations) == 1  # exp inside the pooling reduction


def test_several_readers_of_pooling_windows_read_their_input_from_a_buffer(check):
    lowering, _ = check(_pool_of_exp([prims.amax, prims.sum]), torch.randn(3, 8, 6))
    assert len(lowering.operations) == 3  # exp once, then both reductions read it


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text

    def expr(self) -> str:
        return self.text

    def name(self) -> str:
        return self.text


def test_pad_extent_of_a_symbolic_size_is_decided_by_its_shape_env():
    # issue 13: `int(n) > 0` raised "Cannot convert symbols to int" on symbolic sizes
    import sympy

    # not a dependency of this package (the env reaches it through SymInts): the test runs
    # where it is installed (torch-3.12, a dev venv) and skips in this package's own venv
    es = pytest.importorskip("ember_symbolic")
    from ember_inductor_ir.lowering.shape import _spread

    env = es.ShapeEnv()
    n = env.create_symbol(5, _Source("L['x'].size()[0]"), dynamic=es.DimDynamic.DYNAMIC)
    ctx = type("Ctx", (), {"shape_env": env})()
    assert _spread(ctx, n, sympy.Integer(0)) == n  # no gaps: n for every n, no decision
    assert _spread(ctx, n, sympy.Integer(2)) == 3 * n - 2  # n >= 2 is known: no guard
    assert env.guards() == []
    # n - 2 may be 0 (an empty dim spreads to 0): decided on the example value, by a guard
    assert _spread(ctx, n - 2, sympy.Integer(1)) == 2 * (n - 2) - 1
    assert [str(g.expr) for g in env.guards()] == ["s0 > 2"]
    assert _spread(ctx, sympy.Integer(0), sympy.Integer(1)) == 0
