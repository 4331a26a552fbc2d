"""Statistics of who-and-when attribution: agreement on the decisive step, accuracy against a reference.

Pure numpy, like lib.stats (whose agreement() measures agreement on the responsible agent,
a nominal code): arrays in, frozen dataclasses out, no ORM.
"""

from __future__ import annotations

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
