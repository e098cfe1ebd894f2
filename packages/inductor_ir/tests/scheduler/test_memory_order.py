"""Groups reordered where that lowers the peak of live bytes (scheduler/memory_order.py):
a shortcut branch runs before the main path so the block input dies early; library calls
that may have effects keep their order; an order that does not help is left alone."""

from dataclasses import dataclass, field

import torch

from conftest import FUSING_GPU, check_against_eager, prim_graph
from ember_inductor_ir import lower, schedule
from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.scheduler.memory_order import order_for_memory
from ember_primops import prims


@dataclass(eq=False)
class Group:
    label: str
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    ops: list = field(default_factory=lambda: [object()])


def _library(label, kernel_name, reads, writes):
    call = ExternKernel(label, print, kernel_name, (), {})
    return Group(label, set(reads), set(writes), [call])


SIZES = {"x": 100, "m1": 400, "m2": 400, "out_m": 10, "s": 10, "out": 10}


def _block(shortcut_kind=None):
    """x feeds a main path (two 400-byte buffers) and, written last, a shortcut."""
    groups = [
        Group("A", {"inp"}, {"x"}),
        Group("B", {"x"}, {"m1"}),
        Group("C", {"m1"}, {"m2"}),
        Group("D", {"m2"}, {"out_m"}),
        Group("E", {"x"}, {"s"}),
        Group("F", {"out_m", "s"}, {"out"}),
    ]
    if shortcut_kind is not None:  # the main path's first step and the shortcut as library calls
        groups[1] = _library("B", shortcut_kind, {"x"}, {"m1"})
        groups[4] = _library("E", shortcut_kind, {"x"}, {"s"})
    return groups


def test_a_shortcut_runs_first_when_that_lowers_the_peak():
    ordered, before, after = order_for_memory(_block(), lambda n: SIZES.get(n, 0), {"inp", "out"})
    assert [g.label for g in ordered] == ["A", "E", "B", "C", "D", "F"]
    assert (before, after) == (900, 810)


def test_pure_library_calls_move_and_others_keep_their_order():
    size = lambda n: SIZES.get(n, 0)  # noqa: E731
    ordered, _, _ = order_for_memory(_block("convolution"), size, {"inp", "out"})
    assert [g.label for g in ordered] == ["A", "E", "B", "C", "D", "F"]
    ordered, _, _ = order_for_memory(_block("bernoulli"), size, {"inp", "out"})
    assert [g.label for g in ordered] == ["A", "B", "E", "C", "D", "F"]  # E still after B


def test_an_order_that_does_not_help_is_kept():
    sizes = dict(SIZES, s=95)  # the shortcut's result is nearly as large as its input
    groups = _block()
    ordered, _, _ = order_for_memory(groups, lambda n: sizes.get(n, 0), {"inp", "out"})
    assert ordered is groups


def test_an_in_place_library_call_keeps_the_graph_in_order():
    groups = _block()
    call = ExternKernel("E", print, "index_put", (), {}, mutates="x")
    groups[4] = Group("E", {"x"}, {"s"}, [call])
    ordered, _, _ = order_for_memory(groups, lambda n: SIZES.get(n, 0), {"inp", "out"})
    assert ordered is groups


def _downsample_block(x, w_main, w_next, w_short):
    def conv(v, w, stride):
        return prims.convolution(v, w, None, [stride, stride], [1, 1], [1, 1], False, [0, 0], 1)

    block_in = prims.abs(x)
    main = conv(prims.abs(conv(block_in, w_main, 1)), w_next, 2)
    return (prims.add(main, conv(block_in, w_short, 2)),)


def test_a_downsampling_block_lowers_its_planned_peak():
    x = torch.randn(2, 8, 16, 16)
    w_main, w_next, w_short = (
        torch.randn(32, 8, 3, 3),
        torch.randn(8, 32, 3, 3),
        torch.randn(8, 8, 3, 3),
    )
    inputs = [x, w_main, w_next, w_short]
    check_against_eager(_downsample_block, *inputs, atol=1e-3, rtol=1e-3)
    sched = schedule(lower(prim_graph(_downsample_block, *inputs), inputs, target=FUSING_GPU))
    convs = [g.extern.name for g in sched if g.extern is not None]
    assert convs[0] == "extern2"  # the shortcut's convolution (made last) runs first
