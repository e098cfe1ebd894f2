"""Timing compiled candidates of one graph on its example inputs, as they will be called, and
leaving no trace behind.

As it will be called: at runtime a compiled graph gets the same parameter tensors call after
call, and inductor's wrapper keeps views of inputs while the same tensors come in. So the
inputs are cloned once and the clones passed to every run of every candidate (fresh clones
per run would time a path the model never takes). A clone that a run wrote in place (an
optimizer step, BatchNorm's running stats) gets the original's values back before the next
run, outside the timed region, and gradients are dropped (`.grad = None`, as `zero_grad()`
does), so every run starts from the example inputs' state. Tensors the graph
module holds itself (parameters, buffers, constants read through get_attr) are snapshotted
and restored, gradients included. The RNG state is forked, so the user's random stream is
the one eager would see. With `training`, a run is a forward and a backward (ones as the
outputs' gradients): aot backends split the two into a pair of graphs, and the pair is
decided together, by their sum.

Candidates are timed in interleaved rounds until the time budget is spent (and at least
`min_runs` rounds are done), so a load spike on this shared machine hits every candidate
alike; the order within a round rotates, so no candidate always follows the same one. In a
round a candidate runs a burst of back-to-back calls (enough to fill about `SAMPLE_S`, after
one untimed call that brings its code and data back into the caches), as a model calls its
graph in a loop; the round's sample is the burst's mean time per call. A candidate slower
than another by `RACE_FACTOR` in every round (at least `RACE_ROUNDS`), once `min_runs`
rounds are done, is dropped from the race (`Timings.dropped`), so the budget goes to the
candidates still in contention. After `max_runs` rounds, a choice not yet settled (the
caller's `settled`: a lead not yet beyond chance) gets up to `EXTEND` times as many rounds,
within the budget.

Test hook: `set_measure(fn)` replaces the clock: `fn(name, run) -> seconds` is called for
each timed run and for the warm-up runs, whose times size the bursts (it must call `run()`
to execute it); `set_measure(None)` restores it.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import ember_frame_hook as fh
from ember.stats import counters

Measure = Callable[[str, Callable[[], None]], float]
_measure: Measure | None = None
#: seconds of back-to-back calls per sample: a tiny graph's call is timed over many calls
SAMPLE_S = 1e-3
MAX_BURST = 64
#: dropped from the race: slower than another candidate by this factor in every round (of
#: at least RACE_ROUNDS: as many as the sign test needs, so racing out is as sure as a choice)
RACE_FACTOR = 1.5
RACE_ROUNDS = 5
#: rounds go on to EXTEND * max_runs (within the budget) while `settled` says the choice is open
EXTEND = 4


def set_measure(measure: Measure | None) -> Measure | None:
    """Installs a clock for timed runs (tests); returns the previous one."""
    global _measure
    previous, _measure = _measure, measure
    return previous


def timeable(example_inputs: Sequence[Any]) -> str | None:
    """Why the inputs cannot be run (fake, meta or symbolic values), or None."""
    for position, value in enumerate(example_inputs):
        if isinstance(value, torch.Tensor):
            if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.is_meta:
                return f"input {position} is a {type(value).__name__} on {value.device}"
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return f"input {position} is symbolic"
    return None


def _clone(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    copy = value.detach().clone()
    return copy.requires_grad_() if value.requires_grad else copy


class InputSet:
    """The timed runs' inputs: clones made once and passed to every run, put back to the
    example inputs' values (only those a run wrote) and without gradients before each."""

    def __init__(self, originals: Sequence[Any]) -> None:
        self.originals = list(originals)
        self.values = [_clone(v) for v in self.originals]
        self.versions = [_version(v) for v in self.values]

    def reset(self) -> None:
        with torch.no_grad():
            for i, (original, value) in enumerate(zip(self.originals, self.values, strict=True)):
                if not isinstance(value, torch.Tensor):
                    continue
                value.grad = None
                if self.versions[i] is not None and value._version == self.versions[i]:
                    continue  # not written (untracked versions: always put back)
                if value.shape == original.shape and value.stride() == original.stride():
                    value.copy_(original)
                else:  # resized in place: a fresh clone (its address changes, rarely)
                    self.values[i] = value = _clone(original)
                self.versions[i] = _version(value)


def _version(value: Any) -> int | None:
    """The version counter, None where there is none (inference tensors track no writes)."""
    if not isinstance(value, torch.Tensor) or value.is_inference():
        return None
    return value._version


def _devices(values: Sequence[Any]) -> list[int]:
    return sorted(
        {v.device.index or 0 for v in values if isinstance(v, torch.Tensor) and v.is_cuda}
    )


def training_run(inputs: Sequence[Any]) -> bool:
    """Whether timed runs include a backward: grad mode on and some input needs a grad."""
    return torch.is_grad_enabled() and any(
        isinstance(v, torch.Tensor) and v.requires_grad for v in inputs
    )


def _backward(outputs: Any) -> None:
    leaves = [
        o
        for o in torch.utils._pytree.tree_leaves(outputs)
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    if leaves:
        torch.autograd.backward(leaves, [torch.ones_like(o) for o in leaves])


@contextlib.contextmanager
def _module_state_kept(gm: torch.nn.Module) -> Iterator[None]:
    """Restores the module's own tensors (values and .grad) after the block."""
    tensors = {id(t): t for t in [*gm.parameters(), *gm.buffers()]}
    for value in vars(gm).values():  # constants set as plain attributes (get_attr)
        if isinstance(value, torch.Tensor):
            tensors[id(value)] = value
    saved = [(t, t.detach().clone(), t.grad) for t in tensors.values()]
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, value, grad in saved:
                tensor.copy_(value)
                tensor.grad = grad


def _default_measure(sync: Callable[[], None]) -> Measure:
    def measure(name: str, run: Callable[[], None]) -> float:
        sync()
        start = time.perf_counter()
        run()
        sync()
        return time.perf_counter() - start

    return measure


@dataclass
class Timings:
    """Per candidate, one sample per round it ran (seconds per call, the rounds aligned: a
    dropped candidate's list is a prefix of the others'), and the candidates left out."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # raised: the error
    dropped: dict[str, str] = field(default_factory=dict)  # raced out: why


@dataclass
class _Runner:
    name: str
    fn: Callable
    inputs: InputSet
    training: bool
    burst: int = 1

    def run(self) -> None:
        outputs = self.fn(*self.inputs.values)
        if self.training:
            _backward(outputs)

    def timed(self, measure: Measure) -> float:
        self.inputs.reset()
        return measure(self.name, self.run)

    def sample(self, measure: Measure) -> float:
        """Mean seconds per call over one burst (after an untimed call, for bursts > 1)."""
        if self.burst > 1:
            self.inputs.reset()
            self.run()
        total = sum(self.timed(measure) for _ in range(self.burst))
        counters["autotune"]["timing_runs"] += self.burst
        return total / self.burst


def time_candidates(
    gm: torch.nn.Module,
    compiled: dict[str, Callable],
    example_inputs: Sequence[Any],
    *,
    budget_s: float,
    warmup: int,
    min_runs: int,
    max_runs: int,
    settled: Callable[[dict[str, list[float]]], bool] | None = None,
) -> Timings:
    """Per-call seconds of each candidate, round by round; those that raised or raced out.
    After `max_runs` rounds, `settled(samples of the candidates still racing)` False (a lead
    not yet beyond chance) buys rounds up to EXTEND * max_runs, within the budget."""
    training = training_run(example_inputs)
    cuda = _devices(example_inputs)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    measure = _measure or _default_measure(sync)
    result = Timings()
    runners: list[_Runner] = []
    inputs = InputSet(example_inputs)  # one set: a candidate's wrapper may keep views of it

    previous = fh.set_eval_frame(None)  # the candidates' Python is not the user's code
    try:
        with torch.random.fork_rng(devices=cuda), _module_state_kept(gm):
            for name, fn in compiled.items():
                runner = _Runner(name, fn, inputs, training)
                try:
                    warm = [runner.timed(measure) for _ in range(warmup)]
                except Exception as error:  # a candidate that cannot run is dropped, logged
                    result.failed[name] = f"{type(error).__name__}: {error}"
                    continue
                if warm:
                    runner.burst = max(
                        1, min(MAX_BURST, math.floor(SAMPLE_S / max(min(warm), 1e-9)))
                    )
                runners.append(runner)
                result.samples[name] = []
            start = time.perf_counter()
            rounds, limit = 0, max_runs
            while runners and rounds < limit:
                for runner in _rotated(runners, rounds):
                    result.samples[runner.name].append(runner.sample(measure))
                rounds += 1
                if rounds >= min_runs and time.perf_counter() - start >= budget_s:
                    break
                if rounds == max_runs and settled is not None:
                    racing = {r.name: result.samples[r.name] for r in runners}
                    limit = max_runs if settled(racing) else EXTEND * max_runs
                if min_runs <= rounds < limit:  # more rounds to come: only for the contenders
                    runners = _race(runners, result)
    finally:
        fh.set_eval_frame(previous)
    return result


def _rotated(runners: list[_Runner], shift: int) -> list[_Runner]:
    shift %= len(runners)
    return runners[shift:] + runners[:shift]


def _race(runners: list[_Runner], result: Timings) -> list[_Runner]:
    """Drops each candidate slower than a remaining one by RACE_FACTOR in every round."""
    kept = list(runners)
    for runner in runners:
        mine = result.samples[runner.name]
        for other in kept:
            pairs = list(zip(mine, result.samples[other.name], strict=False))
            if (
                other is not runner
                and len(pairs) >= RACE_ROUNDS
                and all(a > RACE_FACTOR * b for a, b in pairs)
            ):
                result.dropped[runner.name] = (
                    f"slower than {other.name} by more than {RACE_FACTOR}x in each of "
                    f"{len(pairs)} rounds"
                )
                kept.remove(runner)
                break
    return kept if len(kept) < len(runners) else runners


def median_seconds(runs: list[float]) -> float:
    return statistics.median(runs)
