"""torch.get_rng_state / set_rng_state / manual_seed in a trace (rng_effects.py,
variables/rng_state.py). The test backend runs graphs as they are, so random ops draw from
torch's default generator as in eager: values can be compared exactly."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_utils import freeze_rng_state

import ember_frame_hook as fh
from conftest import Compiled, same
from ember_bytecode_tracer.convert_frame import FrameCompiler
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.rng_effects import INCOMING, RngPlan, RngState


def seeded(op, *args, **kwargs):
    """torch.testing's wrapper_set_seed: a fixed seed inside a frozen RNG state."""
    with freeze_rng_state():
        torch.manual_seed(42)
        return op(*args, **kwargs)


def run_both(fn, *args, fullgraph=True):
    """(eager result, compiled result, compiled, whether the RNG state came back the same)."""
    torch.manual_seed(7)
    expected = fn(*args)
    state_after_eager = torch.get_rng_state()
    compiled = Compiled(fn, fullgraph=fullgraph)
    torch.manual_seed(7)
    got = compiled(*args)
    return expected, got, compiled, torch.equal(state_after_eager, torch.get_rng_state())


def test_seeded_random_op_matches_eager_and_restores_the_state():
    x = torch.randn(8)
    expected, got, compiled, state_same = run_both(
        lambda x: seeded(torch.nn.functional.dropout, x, 0.5), x
    )
    assert same(got, expected) and state_same
    assert compiled.backend.graph_count == 1 and compiled.backend.ops() == ["dropout"]


def test_many_seeded_regions_without_random_ops():
    def fn(x):
        return [seeded(torch.sin, x), seeded(torch.cos, x), seeded(torch.add, x, 1)]

    x = torch.randn(5)
    expected, got, compiled, state_same = run_both(fn, x)
    assert same(got, expected) and state_same
    assert compiled.backend.ops() == ["sin", "cos", "add"]


def test_one_seeded_random_region_among_others():
    def fn(x):
        return [seeded(torch.sin, x), seeded(torch.rand_like, x), seeded(torch.cos, x)]

    x = torch.randn(5)
    expected, got, compiled, state_same = run_both(fn, x)
    assert same(got, expected) and state_same
    assert compiled.backend.graph_count == 1


def test_random_ops_outside_regions_continue_the_stream():
    def fn(x):
        a = torch.rand_like(x)
        with freeze_rng_state():
            b = x.sin()
        return a, b, torch.rand_like(x)

    x = torch.randn(5)
    expected, got, compiled, state_same = run_both(fn, x)
    assert same(got, expected) and state_same
    assert compiled.backend.graph_count == 1


def test_two_seeded_random_regions_cannot_share_a_graph():
    # Eager draws the same numbers twice: the graph would have to reset the generator
    # between its two random ops.
    def fn(x):
        return seeded(torch.rand_like, x), seeded(torch.rand_like, x)

    x = torch.randn(5)
    with pytest.raises(Unsupported, match="after the RNG state was reset"):
        run_both(fn, x)
    expected, got, compiled, state_same = run_both(fn, x, fullgraph=False)
    assert same(got, expected) and same(got[0], got[1]) and state_same
    assert compiled.breaks


def test_restore_then_redraw_breaks():
    def fn(x):
        with freeze_rng_state():
            a = torch.rand_like(x)
        return a, torch.rand_like(x)  # eager: the same numbers again

    x = torch.randn(5)
    with pytest.raises(Unsupported, match="after the RNG state was reset"):
        run_both(fn, x)
    expected, got, _compiled, state_same = run_both(fn, x, fullgraph=False)
    assert same(got, expected) and same(got[0], got[1]) and state_same


def test_reading_the_state_after_a_draw_breaks():
    def fn(x):
        a = torch.rand_like(x)
        state = torch.get_rng_state()
        b = torch.rand_like(x)
        torch.set_rng_state(state)
        return a, b

    with pytest.raises(Unsupported, match="read after random ops"):
        run_both(fn, torch.randn(3))


def test_state_token_is_only_for_set_rng_state():
    def fn(x):
        return x + torch.get_rng_state().sum()

    with pytest.raises(Unsupported, match="set_rng_state"):
        Compiled(fn, fullgraph=True)(torch.randn(3))


def test_seed_from_a_global_is_guarded():
    config = {"seed": 1}

    def fn(x):
        torch.manual_seed(config["seed"])
        return torch.rand_like(x)

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    for seed in (1, 2):
        config["seed"] = seed
        torch.manual_seed(seed)
        expected = torch.rand_like(x)
        assert same(compiled(x), expected)
    assert compiled.backend.graph_count == 2


def test_plan_splits_effects_around_the_draws():
    plan = RngPlan()
    state = plan.read()
    plan.seed(3)
    plan.draw("rand")
    plan.draw("rand")
    plan.restore(state)
    runtime = plan.runtime()
    assert state == INCOMING
    assert [e.kind for e in runtime.before_graph] == ["seed"]
    assert [(e.kind, e.state) for e in runtime.after_graph] == [("restore", INCOMING)]
    assert runtime.needs_incoming


def test_restoring_a_seeded_state_equals_set_rng_state():
    torch.manual_seed(11)
    expected = torch.get_rng_state()
    torch.manual_seed(0)
    torch.rand(3)
    plan = RngPlan()
    plan.restore(RngState(11))
    plan.runtime().enter()
    assert torch.equal(torch.get_rng_state(), expected)


def test_an_unread_random_draw_still_advances_the_generator():
    # torch.rand(3) whose result nothing reads: eager's generator moves on all the same
    def draw_and_add(x):
        torch.rand(3)
        return x + 1

    states = []
    for compiled in (False, True):
        torch.manual_seed(0)
        if compiled:
            with fh.eval_frame(FrameCompiler(lambda gm, inputs: gm.forward)):
                draw_and_add(torch.ones(2))
                draw_and_add(torch.ones(2))
        else:
            draw_and_add(torch.ones(2))
            draw_and_add(torch.ones(2))
        states.append(torch.rand(4))
    assert torch.equal(states[0], states[1])
