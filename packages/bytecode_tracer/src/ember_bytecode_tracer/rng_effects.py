"""The default CPU generator's state, followed symbolically through a trace.

`torch.get_rng_state()`, `torch.set_rng_state(state)` and `torch.manual_seed(c)` change global
state; random ops in the graph draw from that state when the graph runs (in graph order, in a
stream of the backend's own: ember's random prims draw their seeds from the default
generator of their device, CUDA's for CUDA ops, as eager's do). The plan below follows the CPU
generator and counts every random op as a draw from it: for a CUDA op that only adds breaks
(torch.manual_seed reseeds both generators, and set_rng_state leaves CUDA draws alone, in
eager and here alike). The
trace does not put these calls in the graph. It follows which state the
generator is in -- the frame's incoming state, or the state right after `manual_seed(c)` --
and replays the calls around the graph: the ones traced before the graph's first random op
run before the graph, the ones after its last random op run after it.

That is exact (same generator states at the same points, same final state) only when every
random op of the graph draws from one uninterrupted stream. Random ops before and after a
reset (`with freeze_rng_state(): torch.manual_seed(0); ...` twice: eager draws the same
numbers twice) would need the generator reset in the middle of the graph: the trace breaks
there instead. A state read after random ops drew from it (its value depends on what the
graph draws) can only be restored while nothing touched the generator since (a no-op);
restoring it after more random ops or RNG calls is a break too; a
state read in the trace may only be passed back to `set_rng_state`, never used as a tensor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ember_bytecode_tracer.exc import Unsupported

log = logging.getLogger("ember.tracer")


@dataclass(frozen=True)
class RngState:
    """A generator state the trace can name: `seed is None` is the frame's incoming state."""

    seed: int | None = None
    # Read after random ops drew from it: (draws, effects) of the plan when it was read.
    # Such a state is only known while nothing happened since; restoring it then is a no-op.
    after_draws: tuple[int, int] | None = None

    def describe(self) -> str:
        start = "the incoming RNG state" if self.seed is None else f"manual_seed({self.seed})"
        return start if self.after_draws is None else f"{start} after random ops"


INCOMING = RngState()


@dataclass(frozen=True)
class RngEffect:
    kind: str  # "seed": torch.manual_seed(seed); "restore": torch.set_rng_state(<state>)
    state: RngState


def _apply(effects: list[RngEffect], incoming: torch.Tensor | None) -> None:
    for effect in effects:
        if effect.kind == "seed":
            torch.manual_seed(effect.state.seed)
        elif effect.state.seed is None:
            torch.set_rng_state(incoming)
        else:
            # The CPU generator's state right after manual_seed(c), without reseeding the
            # other devices' generators (set_rng_state touches the CPU one only).
            torch.default_generator.manual_seed(effect.state.seed)


@dataclass
class RngRuntime:
    """What the runner does around the compiled graph."""

    before_graph: list[RngEffect]
    after_graph: list[RngEffect]
    needs_incoming: bool

    def enter(self) -> torch.Tensor | None:
        incoming = torch.get_rng_state() if self.needs_incoming else None
        _apply(self.before_graph, incoming)
        return incoming

    def leave(self, incoming: torch.Tensor | None) -> None:
        _apply(self.after_graph, incoming)


@dataclass
class RngPlan:
    """The RNG calls of one trace, and where the graph's random ops drew."""

    current: RngState = INCOMING
    drawn_from_current: bool = False  # random ops drew since `current` was set
    effects: list[RngEffect] = field(default_factory=list)
    draws: int = 0
    first_draw_at: int | None = None  # len(effects) at the first random op
    last_draw_at: int | None = None

    def read(self) -> RngState:
        """torch.get_rng_state(): the state it would return, by name."""
        if self.drawn_from_current:
            return RngState(self.current.seed, (self.draws, len(self.effects)))
        return self.current

    def seed(self, seed: int) -> None:
        self._reset(RngEffect("seed", RngState(seed)))

    def restore(self, state: RngState) -> None:
        if state.after_draws is not None:
            if state.after_draws != (self.draws, len(self.effects)):
                raise Unsupported(
                    "torch.set_rng_state() with a state read after random ops in the same graph, "
                    "once other random ops or RNG calls followed: its value depends on what the "
                    "graph draws (read it outside the compiled region)"
                )
            return  # nothing changed the generator since the read: restoring it changes nothing
        self._reset(RngEffect("restore", state))

    def _reset(self, effect: RngEffect) -> None:
        self.effects.append(effect)
        self.current = effect.state
        self.drawn_from_current = False

    def draw(self, what: str) -> None:
        """A random op joins the graph: it must continue the stream the others drew from."""
        if self.last_draw_at is not None and self.last_draw_at != len(self.effects):
            reset = self.effects[-1]
            raise Unsupported(
                f"{what} draws random numbers after the RNG state was reset "
                f"({reset.kind} to {reset.state.describe()}) following earlier random ops in the "
                "same graph: one graph cannot reset the generator between its random ops"
            )
        if self.first_draw_at is None:
            self.first_draw_at = len(self.effects)
        self.last_draw_at = len(self.effects)
        self.draws += 1
        self.drawn_from_current = True

    def runtime(self) -> RngRuntime | None:
        if not self.effects:
            return None
        split = len(self.effects) if self.first_draw_at is None else self.first_draw_at
        needs_incoming = any(e.kind == "restore" and e.state.seed is None for e in self.effects)
        log.debug(
            "rng effects: %d before the graph, %d after it (%d random ops)",
            split, len(self.effects) - split, self.draws,
        )  # fmt: skip
        return RngRuntime(self.effects[:split], self.effects[split:], needs_incoming)


class RandomOpDetector(TorchDispatchMode):
    """Notes whether computing an example value ran an op that draws random numbers; runs
    `check(func, args, kwargs)` on each op first when given (eager_checks.py), so that one
    mode serves both."""

    def __init__(self, check: Callable[[Any, tuple, dict], None] | None = None) -> None:
        super().__init__()
        self.drew = False
        self.check = check

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.check is not None:
            self.check(func, args, kwargs)
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.drew = True
        return func(*args, **kwargs)
