"""Stages as objects: a name, the work, the check at its boundary; a pipeline is their list.

A stage's time is reported under its name (`ember_events.stage`: the compile report's stage
chart and the progress line read it), its output checked where a checker exists (FX lint,
ember-aot-autograd's functional-graph checks, the loop-IR verifier), and the `EMBER_LOGS`
name that dumps its output is recorded beside it, so `print(pipeline)` says what runs, in
order, how each boundary is checked and where to look.

What flows through is one work record per graph; a stage sets `work.runner` when the graph
is done (compiled, found in a cache, or handed to a fallback), which ends the run.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ember_events import stage as timed

__all__ = ["Pipeline", "Stage", "Work"]


class Work(Protocol):
    """What a stage works on: its `runner` is None until some stage finished the graph."""

    runner: Callable | None


@dataclass(frozen=True)
class Stage:
    """One named step: `run(work)` does it (its docstring says what), `check(work)` verifies
    what it handed on (None where the stage checks itself or no checker exists;
    `checked_by` says which)."""

    name: str
    run: Callable[[Any], None]
    check: Callable[[Any], None] | None = None
    checked_by: str = ""
    logs: str = ""  # the EMBER_LOGS name that shows its output

    @property
    def doc(self) -> str:
        return " ".join((self.run.__doc__ or "").split())

    def __call__(self, work: Work) -> None:
        with timed(self.name):
            self.run(work)
            if self.check is not None and work.runner is None:
                self.check(work)

    def __str__(self) -> str:
        notes = [f"checked: {self.checked_by}"] if self.checked_by else []
        notes += [f"EMBER_LOGS={self.logs}"] if self.logs else []
        text = self.doc + (f" [{'; '.join(notes)}]" if notes else "")
        return textwrap.fill(
            text, 100, initial_indent=f"{self.name:<14}", subsequent_indent=" " * 14
        )


class Pipeline:
    """Stages in the order they run; `run(work, start=name)` enters at a stage."""

    def __init__(self, *stages: Stage) -> None:
        self.stages = stages
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names repeat: {names}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __getitem__(self, name: str) -> Stage:
        return self.stages[self.names.index(name)]

    def run(self, work: Work, start: str | None = None) -> Callable:
        """The stages from `start` (the first by default) on `work`, until one finishes it."""
        first = self.names.index(start) if start is not None else 0
        for step in self.stages[first:]:
            step(work)
            if work.runner is not None:
                return work.runner
        raise RuntimeError(f"no stage of {' -> '.join(self.names[first:])} finished {work!r}")

    def __str__(self) -> str:
        return "\n".join([" -> ".join(self.names), *(str(s) for s in self.stages)])
