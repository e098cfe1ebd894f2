"""combine_runs: which adjacent loops groups a generator may launch as one kernel.

The groups here are stand-ins with what the rule reads (sizes, reads, writes, the memory
plan's allocations), so each refusal is pinned on its own."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ember_inductor_ir import CombinePolicy, combine_runs
from ember_inductor_ir.scheduler import Allocation
from ember_inductor_ir.scheduler.combine import combinable

POLICY = CombinePolicy(max_kernels=4, max_args=10, max_numel=1000)


@dataclass
class Group:
    name: str
    writes_: list[str]
    reads: set[str]
    sizes: list = field(default_factory=lambda: [16])
    reduction_sizes: list = field(default_factory=list)
    extern: object = None

    def buffer_names(self) -> list[str]:
        return list(self.writes_)


class Sched(list):
    def __init__(self, groups, allocations=(), frees=None):
        super().__init__(groups)
        self.allocations = {a.buffer: a for a in allocations}
        self.frees = frees or {}


def _g(k: int, reads=None, **kw) -> Group:
    return Group(f"kernel{k}", [f"buf{k}"], set(reads if reads is not None else {f"arg{k}"}), **kw)


def _names(runs) -> list[list[str]]:
    return [[g.name for g in run] for run in runs]


def test_independent_adjacent_groups_form_runs_of_at_most_max_kernels():
    sched = Sched([_g(k) for k in range(6)])
    assert _names(combine_runs(sched, POLICY)) == [
        ["kernel0", "kernel1", "kernel2", "kernel3"],
        ["kernel4", "kernel5"],
    ]


def test_no_policy_or_a_policy_of_one_kernel_combines_nothing():
    sched = Sched([_g(k) for k in range(3)])
    assert combine_runs(sched, None) == []
    assert combine_runs(sched, CombinePolicy(max_kernels=1)) == []


def test_a_group_reading_what_the_run_wrote_starts_a_new_run():
    sched = Sched([_g(0), _g(1), _g(2, reads={"buf0"}), _g(3)])
    assert _names(combine_runs(sched, POLICY)) == [["kernel0", "kernel1"], ["kernel2", "kernel3"]]


def test_storage_given_by_the_memory_plan_counts_as_the_donor():
    # buf2 takes arg1's storage (arg1 dead after kernel1): kernel2 would write what kernel1
    # reads while both run in one launch
    plan = [Allocation("buf2", "arg1")]
    sched = Sched([_g(0), _g(1), _g(2)], plan)
    assert _names(combine_runs(sched, POLICY)) == [["kernel0", "kernel1"]]
    # in place over its own input: no other group touches that storage
    own = Sched([_g(0), _g(1), _g(2)], [Allocation("buf2", "arg2", in_place=True)])
    assert _names(combine_runs(own, POLICY)) == [["kernel0", "kernel1", "kernel2"]]


def test_refused_groups_end_runs_and_say_why():
    big = _g(2, sizes=[1001])
    red = _g(5, reduction_sizes=[8])
    sym = _g(6, sizes=[sympy.Symbol("s0", positive=True, integer=True)])
    lib = _g(7, extern=object())
    assert combinable(big, POLICY) == "1001 points, more than 1000"
    assert combinable(red, POLICY) == "a reduction"
    assert combinable(sym, POLICY) == "symbolic sizes"
    assert combinable(lib, POLICY) == "a library call"
    assert combinable(_g(8, sizes=[0]), POLICY) == "no points"
    sched = Sched([_g(0), _g(1), big, _g(3), _g(4), red, sym, lib, _g(9)])
    assert _names(combine_runs(sched, POLICY)) == [["kernel0", "kernel1"], ["kernel3", "kernel4"]]


def test_the_generator_may_refuse_a_group_and_arguments_are_bounded():
    sched = Sched([_g(k) for k in range(4)])
    runs = combine_runs(sched, POLICY, lambda g: "no" if g.name == "kernel1" else None)
    assert _names(runs) == [["kernel2", "kernel3"]]
    wide = CombinePolicy(max_kernels=8, max_args=5, max_numel=1000)  # 2 arguments a group
    assert _names(combine_runs(sched, wide)) == [["kernel0", "kernel1"], ["kernel2", "kernel3"]]


def test_a_free_inside_a_run_does_not_end_it():
    # the generator frees after the run's launch; a released input (a weight whose cast is
    # its last reader) used to cut every run of a backward
    sched = Sched([_g(k) for k in range(4)], frees={"kernel1": ["buf9"]})
    assert _names(combine_runs(sched, POLICY)) == [["kernel0", "kernel1", "kernel2", "kernel3"]]


def test_small_groups_reading_only_inputs_gather_before_the_library_calls_between():
    from ember_inductor_ir.scheduler.combine import GATHER_SPAN, gather_input_reads

    inputs = {f"arg{k}" for k in range(20)}

    def lib(k: int, reads: set[str], writes: list[str] | None = None) -> Group:
        return Group(f"mm{k}", writes or [f"out{k}"], reads, extern=object())

    # each weight's cast before its matmul (autocast): the casts gather, then combine
    casts = [_g(0), lib(1, {"buf0"}), _g(2), lib(3, {"buf2"}), _g(4), lib(5, {"buf4"})]
    got = gather_input_reads(casts, inputs, POLICY)
    assert [g.name for g in got] == ["kernel0", "kernel2", "kernel4", "mm1", "mm3", "mm5"]
    assert _names(combine_runs(Sched(got), POLICY)) == [["kernel0", "kernel2", "kernel4"]]
    # not over a group writing what it reads, nor over more than GATHER_SPAN groups, nor
    # when it reads a computed buffer; and a target that combines nothing keeps the order
    writer = [_g(0), lib(1, {"buf0"}, ["arg2"]), _g(2)]
    assert [g.name for g in gather_input_reads(writer, inputs, POLICY)] == [
        "kernel0", "mm1", "kernel2"
    ]  # fmt: skip
    far = [_g(0), *(lib(k, {"buf0"}) for k in range(1, GATHER_SPAN + 2)), _g(9)]
    assert gather_input_reads(far, inputs, POLICY)[-1].name == "kernel9"
    computed = [_g(0), lib(1, {"buf0"}), _g(2, reads={"out1"})]
    assert gather_input_reads(computed, inputs, POLICY) == computed
    assert gather_input_reads(casts, inputs, None) == casts
