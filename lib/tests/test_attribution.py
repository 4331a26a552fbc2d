"""Step agreement and accuracy against a reference: hand-counted values, and intervals that cover."""

import numpy as np
import pytest

from lib.stats.attribution import accuracy, step_agreement


def test_it_counts_agreeing_pairs_within_each_tolerance():
    steps = np.array([[4, 4, -1], [2, 3, -1], [10, 14, 10], [0, -1, 7], [5, -1, -1]])
    res = step_agreement(steps, B=200, seed=1)
    # Pairs: (4,4) | (2,3) | (10,14) (10,10) (14,10) | (0,7) | the last unit has one step and is left out.
    assert res.n_units == 4 and res.n_pairs == 6
    assert res.within[0].value == pytest.approx(2 / 6)
    assert res.within[1].value == pytest.approx(3 / 6)
    assert res.within[3].value == pytest.approx(3 / 6)
    for t in (0, 1, 3):
        assert res.within[t].low <= res.within[t].value <= res.within[t].high


def test_it_says_why_there_is_no_estimate():
    res = step_agreement(np.array([[1, 1], [2, -1]]), B=50)
    assert res.within[0].value is None and "fewer than 2 episodes" in res.within[0].reason


def test_accuracy_compares_agents_case_insensitively_and_steps_within_tolerances():
    acc = accuracy(["WebSurfer", "orchestrator ", "", "Coder"], ["websurfer", "Orchestrator", "X", "Planner"],
                   np.array([5, 9, -1, 0]), np.array([5, 7, 3, 4]))  # fmt: skip
    assert (acc.agent.k, acc.agent.n) == (2, 3)
    assert (acc.step[0].k, acc.step[0].n) == (1, 3)
    assert (acc.step[1].k, acc.step[3].k) == (1, 2)
    assert acc.step[0].low < 1 / 3 < acc.step[0].high


def test_the_step_interval_covers_the_true_share_at_about_its_level():
    rng = np.random.default_rng(7)
    true, hits, runs = 0.6, 0, 200
    for run in range(runs):
        a = rng.integers(0, 30, size=80)
        same = rng.random(80) < true
        b = np.where(same, a, a + 10)
        res = step_agreement(np.stack([a, b], axis=1), B=300, seed=run)
        hits += res.within[0].low <= true <= res.within[0].high
    assert 0.88 <= hits / runs <= 0.99
