"""Build analysis test studies from a compact spec, with their expected matrices computed independently."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass

from django.apps import apps

from annotate.models import Adjudication, Coding, Document, Episode

_SERIAL = itertools.count()
STAGES = ["setup", "intake", "planning", "iterative_execution", "coordination", "verification", "delivery"]
CAPS = ["perception", "reasoning", "memory", "actuation", "communication", "self_monitoring"]


@dataclass(frozen=True)
class Row:
    kind: str
    cluster: str
    stage: str = "iterative_execution"
    cap: str = "actuation"
    type: str = "TUS-03"
    source: str = "llm"
    how: str = "agree"  # agree, disagree, adjudicated, single, uncoded, naf, new_type
    split: str = "primary"


def paper_rows(n_repos: int = 9, n_papers: int = 12) -> list[Row]:
    """A small GitHub/literature study: GitHub concentrated in iterative_execution x actuation."""
    rows = []
    for r in range(n_repos):
        for i in range(1 + r % 4):
            hot = (r + i) % 3 != 0
            rows.append(Row("github_issue", f"org{r}/repo", "iterative_execution" if hot else "setup",
                            "actuation" if hot else "memory", "TUS-03" if hot else "ENV-01"))  # fmt: skip
    for p in range(n_papers):
        hot = p % 5 == 0
        rows.append(Row("literature", f"paper{p:02d}", "iterative_execution" if hot else "planning",
                        "actuation" if hot else "reasoning", "PLN-01", "agent_design"))  # fmt: skip
    rows += [
        Row("github_issue", "org0/repo", how="disagree"),
        Row("github_issue", "org1/repo", how="disagree"),
        Row("github_issue", "org2/repo", "delivery", "communication", how="adjudicated"),
        Row("github_issue", "org3/repo", how="uncoded"),
        Row("github_issue", "org4/repo", how="single"),
        Row("github_issue", "org5/repo", how="naf"),
        Row("literature", "paper99", how="disagree"),
        Row("literature", "hold1", "planning", "reasoning", split="holdout"),
        Row("literature", "hold2", split="holdout", how="new_type"),
        Row("literature", "hold3", split="holdout", how="disagree"),
        Row("github_issue", "org6/repo", "delivery", "actuation", split="holdout"),
    ]
    return rows


class _Memo:
    """Codebook lookups, each code fetched once."""

    def __init__(self, codes):
        self.codes, self.cache = codes, {}

    def __getattr__(self, axis):
        def get(code):
            if (axis, code) not in self.cache:
                self.cache[(axis, code)] = getattr(self.codes, axis)(code)
            return self.cache[(axis, code)]

        return get


def build(study, rows: list[Row], codes, coders) -> None:
    """Create documents, episodes, codings (two coders) and adjudications for `rows`, in the given order."""
    owner = coders[0]
    codes = _Memo(codes)
    for n, row in enumerate(rows):
        doc = Document.objects.create(
            study=study, kind=row.kind, external_id=f"{row.cluster}#{next(_SERIAL)}",
            cluster=row.cluster, title=f"{row.kind} {n}",
        )  # fmt: skip
        ep = Episode.objects.create(document=doc, study=study, split=row.split)
        values = _values(row, codes)
        if row.how == "uncoded":
            continue
        if row.how == "single":
            Coding.objects.create(episode=ep, coder=coders[0], **values)
            continue
        Coding.objects.create(episode=ep, coder=coders[0], **values)
        other = dict(values)
        if row.how in ("disagree", "adjudicated"):
            other["stage"] = codes.stage("verification" if row.stage != "verification" else "setup")
        Coding.objects.create(episode=ep, coder=coders[1], **other)
        if row.how == "adjudicated":
            Adjudication.objects.create(episode=ep, adjudicator=owner, rationale="decided", **values)


def _values(row: Row, codes) -> dict:
    if row.how == "naf":
        return {"not_a_failure": True, "not_a_failure_reason": "own config"}
    new = row.how == "new_type"
    return {
        "failure_type": None if new else codes.type(row.type),
        "needs_new_type": new,
        "source": codes.source(row.source),
        "stage": codes.stage(row.stage),
        "capability": codes.capability(row.cap),
    }


def expected_counts(rows: list[Row]) -> dict[str, list[list[int]]]:
    """Matrices by kind, straight from the spec: usable primary failure labels only."""
    out = {k: [[0] * len(CAPS) for _ in STAGES] for k in ("github_issue", "literature", "incident", "trace")}
    for row in rows:
        if row.split != "primary" or row.how in ("disagree", "uncoded", "single", "naf"):
            continue
        out[row.kind][STAGES.index(row.stage)][CAPS.index(row.cap)] += 1
    return out


def expected_excluded(rows: list[Row]) -> Counter:
    reasons = {"disagree": "disagreement", "uncoded": "uncoded", "single": "incomplete", "naf": "not_a_failure"}
    return Counter(reasons[r.how] for r in rows if r.split == "primary" and r.how in reasons)


def db_snapshot() -> tuple:
    """Row counts of every model, and a hash of every coding and adjudication."""
    counts = tuple(
        (m._meta.label, m.objects.count()) for m in apps.get_models() if m._meta.app_label in ("annotate", "taxonomy")
    )
    rows = list(Coding.objects.order_by("id").values_list()) + list(Adjudication.objects.order_by("id").values_list())
    return counts, hashlib.sha256(repr(rows).encode()).hexdigest()
