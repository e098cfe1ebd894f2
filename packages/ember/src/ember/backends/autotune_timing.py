"""Timing compiled candidates of one graph on its example inputs, leaving no trace behind.

Each timed run gets fresh clones of the inputs (made outside the timed region), so a graph
that writes its inputs in place (an optimizer step, BatchNorm's running stats) writes
clones. Tensors the graph module holds itself (parameters, buffers, constants read through
get_attr) are snapshotted and restored, gradients included. The RNG state is forked, so the
user's random stream is the one eager would see. With `training`, a run is a forward and a
backward (ones as the outputs' gradients): aot backends split the two into a pair of
graphs, and the pair is decided together, by their sum.

Candidates are timed in interleaved rounds (one run each per round) until the time budget
is spent (and at least `min_runs` rounds are done), so a load spike on this shared machine hits every candidate alike; the figure
kept is the median of a candidate's runs.

Test hook: `set_measure(fn)` replaces the clock: `fn(name, run) -> seconds` is called for
each timed run (it must call `run()` to execute it); `set_measure(None)` restores it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

import ember_frame_hook as fh
from ember.stats import counters

Measure = Callable[[str, Callable[[], None]], float]
_measure: Measure | None = None


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


def time_candidates(
    gm: torch.nn.Module,
    compiled: dict[str, Callable],
    example_inputs: Sequence[Any],
    *,
    budget_s: float,
    warmup: int,
    min_runs: int,
    max_runs: int,
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Seconds per timed run of each candidate, and the candidates that raised (dropped)."""
    training = training_run(example_inputs)
    cuda = _devices(example_inputs)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    measure = _measure or _default_measure(sync)
    failed: dict[str, str] = {}
    times: dict[str, list[float]] = {name: [] for name in compiled}

    def one_run(fn: Callable, inputs: list) -> None:
        outputs = fn(*inputs)
        if training:
            _backward(outputs)

    previous = fh.set_eval_frame(None)  # the candidates' Python is not the user's code
    try:
        with torch.random.fork_rng(devices=cuda), _module_state_kept(gm):
            for name, fn in list(compiled.items()):
                try:
                    for _ in range(warmup):
                        one_run(fn, [_clone(v) for v in example_inputs])
                except Exception as error:  # a candidate that cannot run is dropped, logged
                    failed[name] = f"{type(error).__name__}: {error}"
                    del times[name]
            start = time.perf_counter()
            rounds = 0
            while times and rounds < max_runs:
                for name in times:
                    inputs = [_clone(v) for v in example_inputs]
                    fn = compiled[name]
                    times[name].append(measure(name, lambda: one_run(fn, inputs)))  # noqa: B023
                    counters["autotune"]["timing_runs"] += 1
                rounds += 1
                if rounds >= min_runs and time.perf_counter() - start >= budget_s:
                    break
    finally:
        fh.set_eval_frame(previous)
    return times, failed


def median_seconds(runs: list[float]) -> float:
    return statistics.median(runs)
