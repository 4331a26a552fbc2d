"""How much do suggestions sway coders? The randomised exposure experiment.

Assignment. With `Study.exposure_experiment` on, every (episode, coder) pair is
assigned from the study's stored seed to one of two arms: `before` (the coding
page shows suggestions from the start) or `after` (they appear only once the
coder has chosen a type). The randomisation is stratified by coder, in permuted
blocks of two: a coder's n-th episode in the experiment (n = how many first saves
they have recorded in the study) falls in block n // 2, and a seeded coin per
(coder, block) decides which of the block's two places is `before`. Every coder
therefore codes as many episodes in each arm, to within one, and no coder's
habits can load one arm. It is a pure function of (seed, coder, n).

The coding page computes the arm when it renders (a read: it counts the coder's
records) and carries it, with the time it was opened, in a signed value that the
save posts back; the save records arm and times once (CodingExposure). So no GET
writes anything, the time to save is measured on the server's clock, and a coder
with two tabs open gets the same arm in both (both were offered place n).

The report (`exposure_report`, pure: rows in, frozen dataclasses out) gives per arm:
- accuracy of the coders' types against the final labels (Wilson interval);
- agreement between coders: the share of coder pairs on one episode, both in the arm,
  who chose the same type (Wilson interval over pairs);
- time to save (first save minus page open): median with a seeded percentile bootstrap interval;
- automation bias: of the codings that accepted a suggestion unchanged and have a
  final label, the share whose final label contradicts the accepted type (Wilson);
- changed after seeing suggestions (the `after` arm): of the codings with a stored first choice
  (FirstChoice, recorded before the suggestions were shown), the share whose saved type differs
  from it, and of those the share that moved to the suggested top type (Wilson).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from lib.stats.intervals import wilson

ARMS = ("before", "after")
BOOTSTRAP = 2000
LEVEL = 0.95


def exposure_arm(seed: int, coder_id: int, n_done: int) -> str:
    """The arm of a coder's next episode, given how many they have done in the experiment."""
    block = n_done // 2
    digest = hashlib.blake2b(f"{seed}:exposure:{coder_id}:{block}".encode(), digest_size=8).digest()
    coin = digest[0] & 1
    return ARMS[(n_done % 2) ^ coin]


@dataclass(frozen=True)
class Share:
    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Duration:
    n: int
    median_s: float | None
    low_s: float | None
    high_s: float | None


@dataclass(frozen=True)
class ArmReport:
    arm: str
    codings: int
    coders: int
    accuracy: Share
    agreement: Share
    time_to_save: Duration
    automation_bias: Share
    changed_after_seeing: Share
    changed_to_suggestion: Share


@dataclass(frozen=True)
class ExposureReport:
    arms: tuple[ArmReport, ...]
    seed: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExposureRow:
    """One coder's coding of one episode in the experiment."""

    episode_id: int
    coder_id: int
    arm: str
    chosen_type: str | None  # the coder's type, "(not a failure)" for a non-failure
    final_type: str | None  # the episode's final label, None without one
    seconds_to_save: float | None
    accepted_type: str | None  # the suggested type the coder accepted unchanged, else None
    first_choice_type: str | None = None  # the type chosen before the suggestions showed (`after` arm)
    suggested_type: str | None = None  # the top suggested type the coder then saw, if any


def _share(k: int, n: int) -> Share:
    w = wilson(k, n, level=LEVEL)
    r = lambda x: None if x is None else round(float(x), 4)  # noqa: E731
    return Share(k, n, r(w.value), r(w.low), r(w.high))


def _duration(seconds: Sequence[float], seed: int) -> Duration:
    x = np.asarray([s for s in seconds if s is not None and s >= 0], dtype=float)
    if x.size == 0:
        return Duration(0, None, None, None)
    median = float(np.median(x))
    if x.size == 1:
        return Duration(1, round(median, 1), None, None)
    rng = np.random.default_rng(seed)
    reps = np.median(x[rng.integers(0, x.size, size=(BOOTSTRAP, x.size))], axis=1)
    low, high = np.quantile(reps, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return Duration(int(x.size), round(median, 1), round(float(low), 1), round(float(high), 1))


def exposure_report(rows: Sequence[ExposureRow], *, seed: int) -> ExposureReport:
    """Per-arm accuracy, agreement, time to save and automation bias, each with its interval and size."""
    arms = []
    for arm in ARMS:
        mine = [r for r in rows if r.arm == arm]
        labelled = [r for r in mine if r.final_type is not None and r.chosen_type is not None]
        by_episode: dict[int, list[ExposureRow]] = defaultdict(list)
        for r in mine:
            if r.chosen_type is not None:
                by_episode[r.episode_id].append(r)
        pairs = [
            (a.chosen_type == b.chosen_type)
            for group in by_episode.values()
            for i, a in enumerate(group)
            for b in group[i + 1 :]
        ]
        accepted = [r for r in mine if r.accepted_type is not None and r.final_type is not None]
        first = [r for r in mine if r.first_choice_type is not None and r.chosen_type is not None]
        changed = [r for r in first if r.chosen_type != r.first_choice_type]
        to_suggestion = [r for r in changed if r.suggested_type is not None and r.chosen_type == r.suggested_type]
        arms.append(
            ArmReport(
                arm=arm,
                codings=len(mine),
                coders=len({r.coder_id for r in mine}),
                accuracy=_share(sum(r.chosen_type == r.final_type for r in labelled), len(labelled)),
                agreement=_share(sum(pairs), len(pairs)),
                time_to_save=_duration([r.seconds_to_save for r in mine], seed),
                automation_bias=_share(sum(r.accepted_type != r.final_type for r in accepted), len(accepted)),
                changed_after_seeing=_share(len(changed), len(first)),
                changed_to_suggestion=_share(len(to_suggestion), len(changed)),
            )
        )
    return ExposureReport(arms=tuple(arms), seed=seed)
