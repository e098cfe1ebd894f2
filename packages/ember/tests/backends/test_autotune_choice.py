"""autotune_choice: inductor (the reference) is kept unless another candidate is clearly faster,
in enough interleaved rounds to rule out chance (sign test) and by more than the margin."""

from __future__ import annotations

import pytest

from ember.backends.autotune_choice import choose, compare, settled, sign_test

ORDER = ["eager", "aot_eager", "inductor"]


def test_sign_test_is_the_binomial_tail():
    assert sign_test(5, 5) == pytest.approx(1 / 32)
    assert sign_test(0, 4) == 1.0
    assert sign_test(9, 10) == pytest.approx(11 / 1024)


def test_a_tie_keeps_inductor():
    samples = {"eager": [1.0] * 20, "inductor": [1.0] * 20}
    assert choose(samples, ORDER, margin=0.0)[0] == "inductor"


def test_eager_kept_when_faster_in_every_round_of_enough_rounds():
    samples = {"eager": [0.9] * 5, "aot_eager": [5.0] * 5, "inductor": [1.0] * 5}
    assert choose(samples, ORDER, margin=0.0)[0] == "eager"
    assert choose({n: s[:4] for n, s in samples.items()}, ORDER, margin=0.0)[0] == "inductor"


def test_a_median_win_that_chance_explains_keeps_inductor():
    # faster by 30% in the median round, but only in 6 rounds of 10: a coin does that often
    eager = [0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 1.2, 1.2, 1.2, 1.2]
    samples = {"eager": eager, "inductor": [1.0] * 10}
    assert compare(eager, [1.0] * 10).ratio == pytest.approx(0.7)
    assert choose(samples, ORDER, margin=0.0)[0] == "inductor"


def test_the_margin_is_on_the_median_ratio():
    samples = {"eager": [0.97] * 10, "inductor": [1.0] * 10}
    assert choose(samples, ORDER, margin=0.0)[0] == "eager"
    assert choose(samples, ORDER, margin=0.05)[0] == "inductor"


def test_rounds_are_paired_so_a_load_spike_hits_both():
    # the machine got 3x slower halfway: eager still wins every round it shares with inductor
    samples = {"eager": [0.9] * 5 + [2.7] * 5, "inductor": [1.0] * 5 + [3.0] * 5}
    assert compare(samples["eager"], samples["inductor"]).wins == 10
    assert choose(samples, ORDER, margin=0.0)[0] == "eager"


def test_without_inductor_the_lowest_median_is_the_reference():
    samples = {"eager": [1.0] * 6, "aot_eager": [0.5] * 6}
    assert choose(samples, ORDER, margin=0.0)[0] == "aot_eager"


def test_each_challenge_is_reported_as_evidence():
    samples = {"eager": [0.9] * 6, "aot_eager": [5.0] * 6, "inductor": [1.0] * 6}
    choice, evidence = choose(samples, ORDER, margin=0.0)
    assert choice == "eager"
    assert evidence == {
        "eager vs inductor": "faster in 6/6 rounds, ratio 0.900, p=0.016",
        "aot_eager vs eager": "faster in 0/6 rounds, ratio 5.556, p=1",
    }


def test_an_unproven_lead_is_not_settled():
    lead = {"eager": [0.7] * 3 + [1.2] * 2, "inductor": [1.0] * 5}  # 3/5 rounds: chance
    assert not settled(lead, ORDER, margin=0.0)
    proven = {"eager": [0.9] * 6, "inductor": [1.0] * 6}
    behind = {"eager": [1.1] * 6, "inductor": [1.0] * 6}
    assert settled(proven, ORDER, margin=0.0) and settled(behind, ORDER, margin=0.0)
    assert settled(lead, ORDER, margin=0.5)  # a lead within the margin cannot win anyway
