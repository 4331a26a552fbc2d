"""How good the suggestions are, per backend and model, measured against the humans.

- acceptance, edit and rejection rates of the reviewed suggestions;
- top-1 and top-3 accuracy against the final labels (annotate.coding.labels: the
  adjudication, else the codes all coders agree on) per axis and per type;
- Cohen's kappa of the suggester's top-1 as one more coder against each human
  coder, beside the humans' own pairwise kappa for reference;
- a calibration table: top-1 confidence bins against top-1 type accuracy;
- tokens and cost.

For each (backend, model) the newest usable suggestion of each episode is the
one measured. Local-model suggestions for labelled episodes are out-of-fold
(see annotate.suggestions.local_model), so none of this is in-sample.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from itertools import combinations

import numpy as np
from django.db.models import Exists, OuterRef

from annotate.coding.labels import final_labels
from annotate.models import Coding, Study, Suggestion, SuggestionRejection, SuggestionStatus
from annotate.suggestions.base import AXES
from taxonomy.models import AxisValue, FailureType

NAF = "(not a failure)"
NEW = "(needs a new type)"
FIELDS = ("failure_type", *AXES)
BINS = np.arange(11) / 10  # exact tenths, so a confidence of 0.3 falls in the 0.3 to 0.4 bin


@dataclass(frozen=True)
class Accuracy:
    n: int
    top1: float | None
    top3: float | None


@dataclass(frozen=True)
class CalibrationBin:
    low: float
    high: float
    n: int
    mean_confidence: float | None
    accuracy: float | None


@dataclass(frozen=True)
class Kappa:
    coder: str
    n: int
    kappa: float | None


@dataclass
class BackendQuality:
    backend: str
    model: str
    suggestions: int  # all rows, failed ones included
    episodes: int  # episodes with a usable suggestion
    errors: int
    flagged: int
    pending: int
    accepted: int
    edited: int
    rejected: int
    acceptance_rate: float | None
    edit_rate: float | None
    rejection_rate: float | None
    accuracy: dict[str, Accuracy] = field(default_factory=dict)
    by_type: dict[str, Accuracy] = field(default_factory=dict)
    kappa: dict[str, list[Kappa]] = field(default_factory=dict)
    kappa_mean: dict[str, float | None] = field(default_factory=dict)
    calibration: list[CalibrationBin] = field(default_factory=list)
    ece: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: str = "0"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class QualityReport:
    labelled_episodes: int
    human_kappa: dict[str, float | None]
    backends: list[BackendQuality]

    def as_dict(self) -> dict:
        return {
            "labelled_episodes": self.labelled_episodes,
            "human_kappa": self.human_kappa,
            "backends": [b.as_dict() for b in self.backends],
        }


def _rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _kappa(a: list[str], b: list[str]) -> float | None:
    from sklearn.metrics import cohen_kappa_score  # scikit-learn, pandas and pyarrow: 100 MB the web need not load

    if len(a) < 2 or len(set(a) | set(b)) < 2:
        return None
    value = cohen_kappa_score(a, b)
    return None if np.isnan(value) else round(float(value), 4)


def _label_codes(label, type_code: dict, axis_code: dict) -> dict[str, str | None]:
    if label.not_a_failure:
        return {"failure_type": NAF, **dict.fromkeys(AXES)}
    return {
        "failure_type": type_code.get(label.failure_type_id) if label.failure_type_id else NEW,
        **{axis: axis_code.get(getattr(label, f"{axis}_id")) for axis in AXES},
    }


def _coding_codes(c: dict, type_code: dict, axis_code: dict) -> dict[str, str | None]:
    if c["not_a_failure"]:
        return {"failure_type": NAF, **dict.fromkeys(AXES)}
    return {
        "failure_type": type_code.get(c["failure_type_id"]) if c["failure_type_id"] else NEW,
        **{axis: axis_code.get(c[f"{axis}_id"]) for axis in AXES},
    }


def _suggested(row: dict) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """The top-1 codes and the top-3 code lists of a stored suggestion."""
    cands = row["candidates"] or []
    if row["not_a_failure"]:
        top1 = {"failure_type": NAF, **dict.fromkeys(AXES)}
    else:
        top1 = {f: (cands[0][f] if cands else None) for f in FIELDS}
    top3 = {f: [c[f] for c in cands] for f in FIELDS}
    if row["not_a_failure"]:
        top3["failure_type"] = [NAF, *top3["failure_type"]][:3]
    return top1, top3


def suggestion_quality(study: Study) -> QualityReport:
    """The quality report of every (backend, model) that made suggestions in the study."""
    type_code = dict(FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    axis_code = dict(AxisValue.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    labels = {ep.pk: _label_codes(label, type_code, axis_code) for ep, label in final_labels(study) if label.usable}
    humans: dict[int, dict[str, dict]] = defaultdict(dict)  # episode -> coder -> codes
    for c in Coding.objects.filter(episode__study=study).values(
        "episode_id", "coder__username", "not_a_failure", "failure_type_id", *(f"{a}_id" for a in AXES)
    ):
        humans[c["episode_id"]][c["coder__username"]] = _coding_codes(c, type_code, axis_code)
    # A rejection is each coder's own (SuggestionRejection); the report counts a suggestion that nobody
    # accepted or edited and somebody rejected as rejected.
    rejected = Exists(SuggestionRejection.objects.filter(suggestion=OuterRef("pk")))
    suggestions = Suggestion.objects.filter(episode__study=study).annotate(rejected=rejected)
    rows = suggestions.order_by("created_at", "pk").values(
        "episode_id", "backend", "model", "status", "error", "evidence_flagged", "not_a_failure", "candidates",
        "confidence", "input_tokens", "output_tokens", "cost", "rejected",
    )  # fmt: skip
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["backend"], row["model"])].append(row)
    return QualityReport(
        labelled_episodes=len(labels),
        human_kappa=_human_kappa(humans),
        backends=[_backend_quality(b, m, rs, labels, humans) for (b, m), rs in sorted(groups.items())],
    )


def _human_kappa(humans: dict[int, dict[str, dict]]) -> dict[str, float | None]:
    """Mean pairwise Cohen's kappa between human coders, per axis (the reference for the suggester)."""
    coders = sorted({c for per in humans.values() for c in per})
    out = {}
    for f in FIELDS:
        values = []
        for a, b in combinations(coders, 2):
            pairs = [(per[a][f], per[b][f]) for per in humans.values() if a in per and b in per]
            pairs = [(x, y) for x, y in pairs if x and y]
            k = _kappa([x for x, _ in pairs], [y for _, y in pairs])
            if k is not None:
                values.append(k)
        out[f] = round(float(np.mean(values)), 4) if values else None
    return out


def _backend_quality(backend, model, rows, labels, humans) -> BackendQuality:
    usable = [r for r in rows if not r["error"]]
    latest = {r["episode_id"]: r for r in usable}  # rows are oldest first
    statuses = defaultdict(int)
    for r in usable:
        pending_but_rejected = r["status"] == SuggestionStatus.PENDING and r["rejected"]
        statuses[SuggestionStatus.REJECTED if pending_but_rejected else r["status"]] += 1
    reviewed = (
        statuses[SuggestionStatus.ACCEPTED] + statuses[SuggestionStatus.EDITED] + statuses[SuggestionStatus.REJECTED]
    )
    q = BackendQuality(
        backend=backend,
        model=model,
        suggestions=len(rows),
        episodes=len(latest),
        errors=len(rows) - len(usable),
        flagged=sum(r["evidence_flagged"] for r in usable),
        pending=statuses[SuggestionStatus.PENDING],
        accepted=statuses[SuggestionStatus.ACCEPTED],
        edited=statuses[SuggestionStatus.EDITED],
        rejected=statuses[SuggestionStatus.REJECTED],
        acceptance_rate=_rate(statuses[SuggestionStatus.ACCEPTED], reviewed),
        edit_rate=_rate(statuses[SuggestionStatus.EDITED], reviewed),
        rejection_rate=_rate(statuses[SuggestionStatus.REJECTED], reviewed),
        input_tokens=sum(r["input_tokens"] for r in rows),
        output_tokens=sum(r["output_tokens"] for r in rows),
        cost=str(sum((Decimal(r["cost"]) for r in rows), Decimal(0))),
    )
    suggested = {eid: _suggested(r) for eid, r in latest.items()}
    # Accuracy per axis and per type, against the final labels.
    hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_type: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    conf, correct = [], []
    for eid, label in labels.items():
        if eid not in suggested:
            continue
        top1, top3 = suggested[eid]
        for f in FIELDS:
            if label[f] is None or label[f] == NEW:
                continue
            hit = (top1[f] == label[f], label[f] in top3[f])
            hits[f].append(hit)
            if f == "failure_type":
                by_type[label[f]].append(hit)
                if latest[eid]["confidence"] is not None:
                    conf.append(latest[eid]["confidence"])
                    correct.append(hit[0])
    q.accuracy = {f: _accuracy(hits[f]) for f in FIELDS}
    q.by_type = {code: _accuracy(by_type[code]) for code in sorted(by_type)}
    q.calibration, q.ece = _calibration(np.array(conf, dtype=float), np.array(correct, dtype=bool))
    # The suggester as one more coder: Cohen's kappa against each human, per axis.
    coders = sorted({c for per in humans.values() for c in per})
    for f in FIELDS:
        per_coder = []
        for coder in coders:
            pairs = [
                (suggested[eid][0][f], per[coder][f])
                for eid, per in humans.items()
                if coder in per and eid in suggested and per[coder][f] and suggested[eid][0][f]
            ]
            per_coder.append(Kappa(coder, len(pairs), _kappa([a for a, _ in pairs], [b for _, b in pairs])))
        q.kappa[f] = per_coder
        values = [k.kappa for k in per_coder if k.kappa is not None]
        q.kappa_mean[f] = round(float(np.mean(values)), 4) if values else None
    return q


def _accuracy(hits: list[tuple[bool, bool]]) -> Accuracy:
    n = len(hits)
    return Accuracy(n, _rate(sum(h[0] for h in hits), n), _rate(sum(h[1] for h in hits), n))


def _calibration(conf: np.ndarray, correct: np.ndarray) -> tuple[list[CalibrationBin], float | None]:
    """Ten equal-width confidence bins with their accuracy, and the expected calibration error."""
    idx = np.clip(np.digitize(conf, BINS[1:-1]), 0, len(BINS) - 2) if conf.size else np.array([], dtype=int)
    out, ece = [], 0.0
    for b in range(len(BINS) - 1):
        mask = idx == b
        n = int(mask.sum())
        mean_c = round(float(conf[mask].mean()), 4) if n else None
        acc = round(float(correct[mask].mean()), 4) if n else None
        if n:
            ece += n / conf.size * abs(mean_c - acc)
        out.append(CalibrationBin(round(float(BINS[b]), 2), round(float(BINS[b + 1]), 2), n, mean_c, acc))
    return out, (round(ece, 4) if conf.size else None)
