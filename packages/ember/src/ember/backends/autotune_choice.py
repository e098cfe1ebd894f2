"""Which timed candidate autotune keeps: the reference unless another is clearly faster.

The reference is `inductor`, what `backend="inductor"` would run (or, where it is not a
candidate or dropped out, the candidate with the lowest median). Another candidate replaces
the current choice only when it is clearly faster, on the rounds both ran (autotune_timing
interleaves them, so a round's two samples saw the same machine load):

- faster in enough rounds that chance is ruled out: a one-sided sign test, P(at least that
  many wins | each round a coin flip) <= ALPHA; a tie counts as a loss. It needs at least
  five rounds (2**-5 < 0.05), so a decision is never one noisy sample;
- and faster by more than `margin` in the median of the per-round ratios.

So autotune is never slower than inductor beyond the timing's noise (a tie keeps inductor),
and a graph that inductor makes measurably slower than eager runs eagerly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05  # the sign test's significance level
REFERENCE = "inductor"


@dataclass(frozen=True)
class Comparison:
    """A challenger's samples against the current choice's, round by round."""

    rounds: int
    wins: int  # rounds where the challenger was faster
    ratio: float  # median of challenger / current per round
    p_value: float  # one-sided sign test

    def clearly_faster(self, margin: float) -> bool:
        return self.p_value <= ALPHA and self.ratio < 1 - margin

    def describe(self) -> str:
        return f"faster in {self.wins}/{self.rounds} rounds, ratio {self.ratio:.3f}, p={self.p_value:.2g}"


def compare(challenger: Sequence[float], current: Sequence[float]) -> Comparison:
    pairs = list(zip(challenger, current, strict=False))  # rounds both ran
    if not pairs:
        return Comparison(0, 0, math.inf, 1.0)
    wins = sum(a < b for a, b in pairs)
    ratio = statistics.median(a / b if b > 0 else math.inf for a, b in pairs)
    return Comparison(len(pairs), wins, ratio, sign_test(wins, len(pairs)))


def sign_test(wins: int, rounds: int) -> float:
    """P(X >= wins) for X ~ Binomial(rounds, 1/2)."""
    return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2**rounds


def choose(
    samples: dict[str, list[float]], order: Sequence[str], margin: float
) -> tuple[str, dict[str, str]]:
    """The kept candidate among those in `samples` (each a non-empty list, aligned by round),
    challengers tried in `order`, and each challenge as evidence ("eager vs inductor": ...)."""
    best, challenges = _challenges(samples, order, margin)
    return best, {pair: comparison.describe() for pair, comparison in challenges.items()}


def settled(samples: dict[str, list[float]], order: Sequence[str], margin: float) -> bool:
    """False while a challenger leads (median ratio below 1 - margin) without the sign test
    ruling out chance: more rounds may settle it (autotune_timing extends the timing)."""
    _, challenges = _challenges(samples, order, margin)
    return not any(
        c.ratio < 1 - margin and not c.clearly_faster(margin) for c in challenges.values()
    )


def _challenges(
    samples: dict[str, list[float]], order: Sequence[str], margin: float
) -> tuple[str, dict[str, Comparison]]:
    names = [n for n in order if n in samples]
    if REFERENCE in samples:
        best = REFERENCE
    else:
        best = min(names, key=lambda n: statistics.median(samples[n]))
    challenges = {}
    for name in [n for n in names if n != best]:
        comparison = compare(samples[name], samples[best])
        challenges[f"{name} vs {best}"] = comparison
        if comparison.clearly_faster(margin):
            best = name
    return best, challenges
