"""Measuring a suggester against known answers: cross-validation, baselines, calibration (pure, no ORM).

The audit (annotate.suggestions.audit) and the quality bench (bench/suggest_quality_bench.py)
both measure through these functions, so the numbers on the Suggestions page and the
bench's numbers mean the same thing:

- per axis, top-1 and top-3 accuracy with Wilson intervals (lib.stats.wilson);
- the most-common-value baseline, learnt on the training folds only and scored on
  the test fold, so it is no more in-sample than the model; the top-3 floor is the
  three most common values (a hit when the answer is one of them);
- whether the model beats that baseline at the 95% level: a one-sided exact
  McNemar (sign) test on the items where exactly one of the two is right;
- the expected calibration error of the top-1 type confidence (ten equal bins),
  with a percentile-bootstrap interval over the items.

"not a failure" counts as one more value of the type axis; the other axes are
measured on the items whose label has a value there.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from annotate.suggestions.base import AXES, Answer
from lib.stats.intervals import wilson

NAF = "__not_a_failure__"
FIELDS = ("failure_type", *AXES)
LEVEL = 0.95
BINS = np.arange(11) / 10


@dataclass(frozen=True)
class LabelledText:
    """One labelled episode: its text, its context and its final codes (failure_type NAF for not a failure)."""

    key: int
    title: str
    text: str
    cluster: str = ""
    kind: str = ""
    failure_type: str | None = None
    source: str | None = None
    stage: str | None = None
    capability: str | None = None

    def code(self, f: str) -> str | None:
        return getattr(self, f)


@dataclass(frozen=True)
class AxisScore:
    axis: str
    n: int
    top1: float | None
    top1_low: float | None
    top1_high: float | None
    top3: float | None
    top3_low: float | None
    top3_high: float | None
    baseline: float | None
    baseline_low: float | None
    baseline_high: float | None
    better_p: float | None  # one-sided exact McNemar p-value, model top-1 better than the baseline
    beats_baseline: bool
    # The top-3 floor: the three most common values of the training folds, against the model's top 3.
    baseline3: float | None = None
    baseline3_low: float | None = None
    baseline3_high: float | None = None
    better3_p: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Measurement:
    n: int
    axes: dict[str, AxisScore]
    ece: float | None
    folds: int
    abstained: int = 0
    notes: tuple[str, ...] = field(default=())
    ece_low: float | None = None
    ece_high: float | None = None

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "folds": self.folds,
            "ece": self.ece,
            "ece_low": self.ece_low,
            "ece_high": self.ece_high,
            "abstained": self.abstained,
            "axes": {k: v.as_dict() for k, v in self.axes.items()},
            "notes": list(self.notes),
        }


def predicted(answer: Answer) -> tuple[dict[str, str | None], dict[str, list[str]], float | None]:
    """Top-1 codes, top-3 code lists and the top-1 confidence of an answer (NAF for "not a failure")."""
    cands = answer.candidates
    if answer.not_a_failure:
        top1: dict[str, str | None] = {"failure_type": NAF, **dict.fromkeys(AXES)}
    else:
        top1 = {f: (getattr(cands[0], f) if cands else None) for f in FIELDS}
    top3 = {f: [getattr(c, f) for c in cands][:3] for f in FIELDS}
    if answer.not_a_failure:
        top3["failure_type"] = [NAF, *top3["failure_type"]][:3]
    conf = cands[0].confidence if cands else None
    return top1, top3, conf


def calibration_error(conf: np.ndarray, correct: np.ndarray) -> float | None:
    """Expected calibration error over ten equal-width confidence bins."""
    if conf.size == 0:
        return None
    idx = np.clip(np.digitize(conf, BINS[1:-1]), 0, len(BINS) - 2)
    ece = 0.0
    for b in range(len(BINS) - 1):
        mask = idx == b
        if mask.any():
            ece += mask.sum() / conf.size * abs(float(conf[mask].mean()) - float(correct[mask].mean()))
    return round(ece, 4)


def folds_for(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number of each of n items: k folds of near-equal size, in a seeded order (k >= n: leave-one-out)."""
    k = min(k, n)
    return np.random.default_rng(seed).permutation(np.arange(n) % k)


def audit_folds(n: int) -> int:
    """k=5, or leave-one-out below 50 labels (the audit's rule)."""
    return n if n < 50 else 5


def _majority(items: Sequence[LabelledText], f: str) -> str | None:
    top = most_common(items, f, 1)
    return top[0] if top else None


def most_common(items: Sequence[LabelledText], f: str, k: int) -> list[str]:
    """The k most common values of field f, most common first (ties: the smaller code, so it is deterministic)."""
    counts = Counter(i.code(f) for i in items if i.code(f))
    return sorted(counts, key=lambda c: (-counts[c], c))[:k]


def floors(items: Sequence[LabelledText]) -> dict[str, str | list[str] | None]:
    """The baseline predictions learnt from `items`: per field its most common value, and under "<field>@3" the
    three most common values (the top-3 floor)."""
    out: dict[str, str | list[str] | None] = {f: _majority(items, f) for f in FIELDS}
    out.update({f"{f}@3": most_common(items, f, 3) for f in FIELDS})
    return out


def score(
    items: Sequence[LabelledText], answers: Sequence[Answer], baselines: Sequence[dict[str, str | None]], folds: int
) -> Measurement:
    """Accuracy per axis with intervals, against the given per-item baseline predictions, and the ECE."""
    per: dict[str, list[tuple[bool, bool, bool]]] = {f: [] for f in FIELDS}
    conf, correct = [], []
    for item, answer, base in zip(items, answers, baselines, strict=True):
        top1, top3, c = predicted(answer)
        for f in FIELDS:
            truth = item.code(f)
            if not truth:
                continue
            per[f].append((top1[f] == truth, truth in top3[f], base.get(f) == truth, truth in base.get(f"{f}@3", ())))
        if item.failure_type and c is not None:
            conf.append(c)
            correct.append(top1["failure_type"] == item.failure_type)
    axes = {}
    for f, hits in per.items():
        n = len(hits)
        h1 = sum(h[0] for h in hits)
        h3 = sum(h[1] for h in hits)
        hb = sum(h[2] for h in hits)
        hb3 = sum(h[3] for h in hits)
        better = sum(h[0] and not h[2] for h in hits)
        worse = sum(h[2] and not h[0] for h in hits)
        p = sign_test(better, better + worse) if better + worse else None
        better3 = sum(h[1] and not h[3] for h in hits)
        worse3 = sum(h[3] and not h[1] for h in hits)
        p3 = sign_test(better3, better3 + worse3) if better3 + worse3 else None
        w1, w3, wb, wb3 = wilson(h1, n), wilson(h3, n), wilson(hb, n), wilson(hb3, n)
        axes[f] = AxisScore(
            axis=f,
            n=n,
            top1=_r(w1.value),
            top1_low=_r(w1.low),
            top1_high=_r(w1.high),
            top3=_r(w3.value),
            top3_low=_r(w3.low),
            top3_high=_r(w3.high),
            baseline=_r(wb.value),
            baseline_low=_r(wb.low),
            baseline_high=_r(wb.high),
            better_p=_r(p),
            beats_baseline=p is not None and p < 1 - LEVEL,
            baseline3=_r(wb3.value),
            baseline3_low=_r(wb3.low),
            baseline3_high=_r(wb3.high),
            better3_p=_r(p3),
        )
    abstained = sum(1 for a in answers if not a.candidates and not a.not_a_failure)
    conf_a, correct_a = np.array(conf, dtype=float), np.array(correct, dtype=bool)
    low, high = calibration_interval(conf_a, correct_a)
    return Measurement(
        n=len(items),
        axes=axes,
        ece=calibration_error(conf_a, correct_a),
        folds=folds,
        abstained=abstained,
        ece_low=low,
        ece_high=high,
    )


def calibration_interval(
    conf: np.ndarray, correct: np.ndarray, *, draws: int = 400, seed: int = 7
) -> tuple[float | None, float | None]:
    """A 95% percentile-bootstrap interval of the ECE, resampling items (vectorised over the draws)."""
    if conf.size < 2:
        return None, None
    idx = np.random.default_rng(seed).integers(0, conf.size, size=(draws, conf.size))
    c, y = conf[idx], correct[idx].astype(float)
    bins = np.clip(np.digitize(c, BINS[1:-1]), 0, len(BINS) - 2)
    ece = np.zeros(draws)
    for b in range(len(BINS) - 1):
        mask = bins == b
        count = mask.sum(axis=1)
        gap = np.abs((c * mask).sum(axis=1) - (y * mask).sum(axis=1))
        ece += np.where(count > 0, gap, 0.0) / conf.size
    lo, hi = np.quantile(ece, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return _r(lo), _r(hi)


def sign_test(k: int, n: int) -> float:
    """One-sided exact binomial p-value P(X >= k) for X ~ Binomial(n, 1/2): the exact McNemar test."""
    return float(sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n)


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def cross_validate(
    items: Sequence[LabelledText],
    fit_predict: Callable[[list[LabelledText], list[LabelledText]], list[Answer]],
    *,
    k: int,
    seed: int = 20240611,
) -> Measurement:
    """Out-of-fold answers from `fit_predict(train, test)` for every item, scored against fold-wise baselines."""
    items = list(items)
    fold = folds_for(len(items), k, seed)
    answers: list[Answer | None] = [None] * len(items)
    baselines: list[dict] = [{}] * len(items)
    for f in range(int(fold.max()) + 1 if len(items) else 0):
        test_idx = np.flatnonzero(fold == f)
        train = [items[i] for i in np.flatnonzero(fold != f)]
        test = [items[i] for i in test_idx]
        base = floors(train)
        for i, a in zip(test_idx, fit_predict(train, test), strict=True):
            answers[i] = a
            baselines[i] = base
    return score(items, [a for a in answers if a is not None], baselines, folds=int(fold.max()) + 1)


def cold(
    items: Sequence[LabelledText], predict: Callable[[list[LabelledText]], list[Answer]], *, k: int
) -> Measurement:
    """The suggester without any labels, against the same fold-wise baselines as `cross_validate`."""
    return cross_validate(items, lambda train, test: predict(test), k=k)
