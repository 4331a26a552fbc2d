"""Statistics of who-and-when attribution: agreement on the decisive step, accuracy against a reference.

Pure numpy, like lib.stats (whose agreement() measures agreement on the responsible agent,
a nominal code): arrays in, frozen dataclasses out, no ORM.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from lib.stats.interrater import Estimate
from lib.stats.intervals import Proportion, wilson

TOLERANCES = (0, 1, 3)


@dataclass(frozen=True)
class StepAgreement:
    """Share of coder pairs whose decisive steps lie within 0, 1 and 3 steps of each other."""

    n_units: int  # episodes with two or more decisive steps
    n_pairs: int
    within: dict[int, Estimate]  # tolerance -> estimate with a bootstrap interval


def _unit_pairs(steps: np.ndarray, tolerance: int) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: agreeing coder pairs and all coder pairs (only coders who gave a step count)."""
    U, R = steps.shape
    agree = np.zeros(U)
    pairs = np.zeros(U)
    for i in range(R):
        for j in range(i + 1, R):
            both = (steps[:, i] >= 0) & (steps[:, j] >= 0)
            pairs += both
            agree += both & (np.abs(steps[:, i] - steps[:, j]) <= tolerance)
    return agree, pairs


def step_agreement(steps: np.ndarray, *, B: int = 1000, seed: int = 0, level: float = 0.95) -> StepAgreement:
    """Pairwise agreement on the decisive step, exact and within ±1 and ±3 steps.

    `steps` is units x coders, -1 where a coder gave no step. The statistic pools pairs over
    episodes (agreeing pairs / pairs); its interval resamples episodes with replacement, B times.
    """
    steps = np.asarray(steps, dtype=np.int64)
    if steps.ndim != 2:
        raise ValueError("steps must be a units x coders matrix")
    keep = (steps >= 0).sum(axis=1) >= 2
    sub = steps[keep]
    U = int(sub.shape[0])
    if U < 2:
        none = Estimate(None, reason="fewer than 2 episodes with decisive steps from two or more coders")
        return StepAgreement(U, int(_unit_pairs(sub, 0)[1].sum()) if U else 0, dict.fromkeys(TOLERANCES, none))
    rng = np.random.default_rng(seed)
    weights = np.stack([np.bincount(rng.integers(0, U, size=U), minlength=U) for _ in range(B)]).astype(float)
    out = {}
    n_pairs = 0
    for t in TOLERANCES:
        agree, pairs = _unit_pairs(sub, t)
        n_pairs = int(pairs.sum())
        value = float(agree.sum() / pairs.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            reps = (weights @ agree) / (weights @ pairs)
        reps = reps[np.isfinite(reps)]
        lo, hi = np.quantile(reps, [(1 - level) / 2, 1 - (1 - level) / 2])
        out[t] = Estimate(value, float(lo), float(hi))
    return StepAgreement(U, n_pairs, out)


@dataclass(frozen=True)
class Accuracy:
    """Agreement of one rater (a coder, the final labels, a suggester) with the reference attribution."""

    agent: Proportion
    step: dict[int, Proportion]  # tolerance -> share within it


def accuracy(
    agents: list[str], ref_agents: list[str], steps: np.ndarray, ref_steps: np.ndarray, *, level: float = 0.95
) -> Accuracy:
    """Agent accuracy over the pairs where both the rater and the reference name an agent, and step
    accuracy over the pairs where both name a step, with Wilson intervals. Agent names compare
    case-insensitively, ignoring surrounding space."""
    pairs = [(a.strip().lower(), r.strip().lower()) for a, r in zip(agents, ref_agents, strict=True)]
    named = [(a, r) for a, r in pairs if a and r]
    agent = wilson(sum(a == r for a, r in named), len(named), level=level)
    steps = np.asarray(steps, dtype=np.int64)
    ref_steps = np.asarray(ref_steps, dtype=np.int64)
    both = (steps >= 0) & (ref_steps >= 0)
    diff = np.abs(steps[both] - ref_steps[both])
    n = int(both.sum())
    return Accuracy(agent, {t: wilson(int((diff <= t).sum()), n, level=level) for t in TOLERANCES})


# Held-out evaluation of a step suggester against the position prior ------------------------------------------

SPLITS = ("choose", "evaluate")


def split_of(name: str) -> str:
    """The split a log belongs to, from a hash of its name alone: the same name always lands in the same split,
    whatever other logs sit beside it, so a log used to choose a rule is never among those it is judged on."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return SPLITS[digest[0] & 1]


@dataclass(frozen=True)
class PositionPrior:
    """The baseline a step suggester must beat: always step k (clipped to the trace's last step), and always the
    most frequent agent. k is chosen separately for exact hits and for hits within ±3."""

    k_exact: int
    k_pm3: int
    agent: str


def prior_steps(k: int, n_steps: np.ndarray) -> np.ndarray:
    """Step k of each trace, or its last step when it is shorter."""
    return np.minimum(k, np.asarray(n_steps, dtype=np.int64) - 1)


def _best_k(ref_steps: np.ndarray, n_steps: np.ndarray, tolerance: int) -> int:
    """The constant step with the most hits within `tolerance` (the smallest such k on a tie)."""
    ks = np.arange(int(n_steps.max()))
    preds = np.minimum(ks[:, None], n_steps[None, :] - 1)
    hits = (np.abs(preds - ref_steps[None, :]) <= tolerance).sum(axis=1)
    return int(ks[int(np.argmax(hits))])


def choose_prior(ref_steps: np.ndarray, n_steps: np.ndarray, ref_agents: list[str]) -> PositionPrior:
    """Choose the position prior on the logs given (the choose split only): the k that hits most reference
    steps exactly, the k that hits most within ±3, and the most frequent reference agent (case-insensitive;
    alphabetically first on a tie)."""
    ref_steps = np.asarray(ref_steps, dtype=np.int64)
    n_steps = np.asarray(n_steps, dtype=np.int64)
    if ref_steps.size == 0 or ref_steps.shape != n_steps.shape:
        raise ValueError("need one reference step and one trace length per log, at least one log")
    if (n_steps < 1).any():
        raise ValueError("every trace needs at least one step")
    names = [a.strip().lower() for a in ref_agents if a.strip()]
    counts: dict[str, int] = {}
    for a in names:
        counts[a] = counts.get(a, 0) + 1
    agent = min(counts, key=lambda a: (-counts[a], a)) if counts else ""
    return PositionPrior(_best_k(ref_steps, n_steps, 0), _best_k(ref_steps, n_steps, 3), agent)


@dataclass(frozen=True)
class HeldOut:
    """A rule's and the prior's accuracy on the evaluate split, with Wilson intervals."""

    n: int
    step_exact: Proportion
    step_pm3: Proportion
    agent: Proportion
    prior_step_exact: Proportion
    prior_step_pm3: Proportion
    prior_agent: Proportion


def held_out(
    *,
    steps: np.ndarray,
    agents: list[str],
    ref_steps: np.ndarray,
    ref_agents: list[str],
    n_steps: np.ndarray,
    prior: PositionPrior,
    level: float = 0.95,
) -> HeldOut:
    """Score a rule's guesses and the (already chosen) prior's on the same held-out logs. Every log counts in
    every denominator: a rule that names no step or agent is wrong there, not excused."""
    steps = np.asarray(steps, dtype=np.int64)
    ref_steps = np.asarray(ref_steps, dtype=np.int64)
    n_steps = np.asarray(n_steps, dtype=np.int64)
    n = int(ref_steps.size)

    def hits(pred: np.ndarray, tolerance: int) -> Proportion:
        return wilson(int(((pred >= 0) & (np.abs(pred - ref_steps) <= tolerance)).sum()), n, level=level)

    def named(guess: list[str]) -> Proportion:
        ok = sum(
            bool(g.strip()) and g.strip().lower() == r.strip().lower() for g, r in zip(guess, ref_agents, strict=True)
        )
        return wilson(ok, n, level=level)

    return HeldOut(
        n=n,
        step_exact=hits(steps, 0),
        step_pm3=hits(steps, 3),
        agent=named(agents),
        prior_step_exact=hits(prior_steps(prior.k_exact, n_steps), 0),
        prior_step_pm3=hits(prior_steps(prior.k_pm3, n_steps), 3),
        prior_agent=named([prior.agent] * n),
    )
