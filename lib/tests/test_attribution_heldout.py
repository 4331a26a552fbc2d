"""Held-out scoring of a step suggester against the position prior: a disjoint, deterministic split, a prior
chosen on the choose split only, and Wilson intervals with every held-out log in every denominator."""

import numpy as np
import pytest

from lib.stats.attribution import PositionPrior, choose_prior, held_out, prior_steps, split_of

NAMES = [f"{half}/{i}.json" for half in ("Algorithm-Generated", "Hand-Crafted") for i in range(1, 200)]


def test_it_splits_by_name_alone_disjointly_and_the_same_way_every_time():
    first = {n: split_of(n) for n in NAMES}
    again = {n: split_of(n) for n in reversed(NAMES)}
    assert first == again
    choose = {n for n, s in first.items() if s == "choose"}
    evaluate = {n for n, s in first.items() if s == "evaluate"}
    assert choose and evaluate and not choose & evaluate and choose | evaluate == set(NAMES)
    # Roughly halves, not everything on one side.
    assert 0.35 < len(choose) / len(NAMES) < 0.65
    # The split of a log does not depend on which other logs are in the folder.
    assert split_of("Hand-Crafted/7.json") == first["Hand-Crafted/7.json"]


def test_it_chooses_k_and_the_agent_on_the_logs_it_is_given():
    # Planted: exact hits peak at step 2 (three logs), but steps 9-14 hold six logs, which a ±3 window
    # centred on 11 or 12 catches all of (k=10 catches five, k=2 four).
    ref = np.array([2, 2, 2, 9, 10, 11, 12, 13, 14, 0])
    n = np.full(ref.size, 30)
    agents = ["Coder", "coder ", "Planner", "Planner", "planner", "Coder", "Planner", "", "x", "y"]
    prior = choose_prior(ref, n, agents)
    assert prior.k_exact == 2
    assert prior.k_pm3 == 11  # 11 and 12 tie; the smaller wins
    assert prior.agent == "planner"  # 4 planners against 3 coders, case and space folded


def test_the_prior_never_points_past_a_trace_and_ties_go_to_the_smaller_k():
    assert prior_steps(5, np.array([3, 10])).tolist() == [2, 5]
    # Every log has 2 steps, references 0 and 1 once each: k=0 and k=1 tie, the smaller wins.
    assert choose_prior(np.array([0, 1]), np.array([2, 2]), ["a", "b"]) == PositionPrior(0, 0, "a")


def test_the_prior_is_scored_only_on_the_logs_given_to_held_out():
    prior = PositionPrior(k_exact=1, k_pm3=4, agent="coder")
    ref = np.array([1, 1, 9, 4])
    n = np.array([10, 10, 10, 3])  # the last trace is short: step 4 becomes its last step, 2
    res = held_out(
        steps=np.array([1, -1, 6, 2]), agents=["Coder", "", "planner", "coder"],
        ref_steps=ref, ref_agents=["coder", "coder", "planner", "x"], n_steps=n, prior=prior,
    )  # fmt: skip
    assert res.n == 4
    # The rule: exact hits on the first and last logs; the log with no step counts as a miss, not excused.
    assert (res.step_exact.k, res.step_exact.n) == (1, 4)
    assert (res.step_pm3.k, res.step_pm3.n) == (3, 4)
    assert (res.agent.k, res.agent.n) == (2, 4)
    # The prior: always step 1 -> hits logs 1, 2; always step 4 (clipped to 2 on the last) within ±3 of 1,1,9,4.
    assert (res.prior_step_exact.k, res.prior_step_pm3.k, res.prior_agent.k) == (2, 3, 2)


def test_held_out_intervals_are_wilson_intervals():
    prior = PositionPrior(0, 0, "a")
    res = held_out(
        steps=np.array([0] * 7 + [5] * 13), agents=["a"] * 20, ref_steps=np.zeros(20, dtype=int),
        ref_agents=["a"] * 20, n_steps=np.full(20, 9), prior=prior,
    )  # fmt: skip
    # 7 of 20, 95% Wilson: [0.1812, 0.5671] (hand-computed from the score formula).
    assert res.step_exact.value == pytest.approx(0.35)
    assert res.step_exact.low == pytest.approx(0.1812, abs=1e-4)
    assert res.step_exact.high == pytest.approx(0.5671, abs=1e-4)


def test_it_refuses_an_empty_choose_split():
    with pytest.raises(ValueError):
        choose_prior(np.array([], dtype=int), np.array([], dtype=int), [])
