"""Reads for incident triage: who is responsible, the board's groups, and similar past incidents.

An incident's responsibility source is the confirmed one once it is coded
(the final label from annotate.coding.labels, else a coder's coding), otherwise the
latest machine suggestion's. Each read costs a fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotate.coding.labels import final_labels
from annotate.models import Coding, Document, DocumentKind, Episode, Study, Suggestion, TriageStatus
from taxonomy.models import AxisValue, FailureType

CONFIRMED, CODED, SUGGESTED, UNKNOWN = "confirmed", "coded", "suggested", "unknown"
AGES = {"1d": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}
STATUS_FILTERS = {
    "open": (TriageStatus.NEW, TriageStatus.TRIAGED),
    "new": (TriageStatus.NEW,),
    "triaged": (TriageStatus.TRIAGED,),
    "resolved": (TriageStatus.RESOLVED,),
    "all": tuple(TriageStatus.values),
}


@dataclass(frozen=True)
class Responsibility:
    state: str  # confirmed (final label), coded (a coder, not yet final), suggested, unknown
    source: str = ""
    source_name: str = ""
    failure_type: str = ""
    failure_type_name: str = ""
    confidence: float | None = None


@dataclass
class BoardFilters:
    service: str = ""
    severity: str = ""
    failure_type: str = ""
    age: str = ""
    status: str = "open"

    @classmethod
    def from_query(cls, data) -> BoardFilters:
        f = cls(**{k: (data.get(k) or "").strip()[:300] for k in ("service", "severity", "failure_type", "age")})
        # "show", not "status": the move form posts its own "status" alongside these filters.
        f.status = data.get("show") if data.get("show") in STATUS_FILTERS else "open"
        f.age = f.age if f.age in AGES else ""
        return f


@dataclass
class BoardGroup:
    source: str
    name: str
    cards: list = field(default_factory=list)


@dataclass(frozen=True)
class Card:
    document: Document
    episode_id: int | None
    responsibility: Responsibility


def responsibilities(study: Study, documents: Iterable[Document]) -> dict[int, Responsibility]:
    """Responsibility per incident document id, in a fixed number of queries."""
    docs = list(documents)
    episodes = dict(
        Episode.objects.filter(document__in=docs, order=0).values_list("pk", "document_id")
    )  # the incident's episode
    if not episodes:
        return {d.pk: Responsibility(UNKNOWN) for d in docs}
    types = {t.pk: (t.code, t.name) for t in FailureType.objects.filter(codebook_id=study.codebook_id)}
    values = {v.pk: (v.code, v.name) for v in AxisValue.objects.filter(codebook_id=study.codebook_id)}
    qs = Episode.objects.filter(pk__in=list(episodes))
    labels = {ep.pk: label for ep, label in final_labels(study, qs)}
    first_coding = {}
    for c in Coding.objects.filter(episode_id__in=list(episodes)).order_by("episode_id", "updated_at"):
        first_coding.setdefault(c.episode_id, c)
    latest = {}
    for s in Suggestion.objects.filter(episode_id__in=list(episodes), error="").order_by("episode_id", "-created_at"):
        latest.setdefault(s.episode_id, s)

    def make(state, source_id, type_id, confidence=None) -> Responsibility:
        source, type_ = values.get(source_id, ("", "")), types.get(type_id, ("", ""))
        return Responsibility(state, source[0], source[1], type_[0], type_[1], confidence)

    out = {}
    for ep_id, doc_id in episodes.items():
        label, coding, suggestion = labels.get(ep_id), first_coding.get(ep_id), latest.get(ep_id)
        if label is not None and label.usable and not label.not_a_failure:
            out[doc_id] = make(CONFIRMED, label.source_id, label.failure_type_id)
        elif coding is not None and not coding.not_a_failure:
            out[doc_id] = make(CODED, coding.source_id, coding.failure_type_id)
        elif suggestion is not None and suggestion.source_id:
            out[doc_id] = make(SUGGESTED, suggestion.source_id, suggestion.failure_type_id, suggestion.confidence)
        else:
            out[doc_id] = Responsibility(UNKNOWN)
    for d in docs:
        out.setdefault(d.pk, Responsibility(UNKNOWN))
    return out


def incidents(study: Study) -> QuerySet[Document]:
    return (
        Document.objects.filter(study=study, kind=DocumentKind.INCIDENT)
        .select_related("assignee")
        .order_by("-occurred_at", "-imported_at", "-id")
    )


def _when(document: Document) -> datetime:
    return document.occurred_at or document.imported_at


def incident_board(study: Study, f: BoardFilters) -> tuple[list[BoardGroup], int]:
    """Incidents grouped by responsibility source (with counts), filtered; unknown sources last."""
    qs = incidents(study).filter(triage_status__in=STATUS_FILTERS[f.status])
    if f.service:
        qs = qs.filter(cluster=f.service)
    if f.severity:
        qs = qs.filter(severity=f.severity)
    if f.age:
        since = timezone.now() - AGES[f.age]
        qs = qs.filter(Q(occurred_at__gte=since) | Q(occurred_at__isnull=True, imported_at__gte=since))
    docs = list(qs[:1000])
    resp = responsibilities(study, docs)
    if f.failure_type:
        docs = [d for d in docs if resp[d.pk].failure_type == f.failure_type]
    episodes = dict(Episode.objects.filter(document__in=docs, order=0).values_list("document_id", "pk"))
    sources = {v.code: v for v in AxisValue.objects.filter(codebook_id=study.codebook_id, axis="source")}
    groups: dict[str, BoardGroup] = {}
    for d in docs:
        r = resp[d.pk]
        key = r.source or UNKNOWN
        if key not in groups:
            groups[key] = BoardGroup(key, r.source_name or "Not yet suggested")
        groups[key].cards.append(Card(d, episodes.get(d.pk), r))
    order = {code: v.order for code, v in sources.items()}
    ordered = sorted(groups.values(), key=lambda g: (g.source == UNKNOWN, order.get(g.source, 999), g.source))
    return ordered, len(docs)


@dataclass(frozen=True)
class Similar:
    document: Document
    reason: str
    score: float


def similar_incidents(study: Study, document: Document, *, limit: int = 5, pool: int = 500) -> list[Similar]:
    """Past incidents with the same failure type, then the nearest by text in the local suggester's space."""
    from annotate.suggestions.codebook_index import text_vectors

    past = list(incidents(study).exclude(pk=document.pk).filter(imported_at__lte=document.imported_at)[:pool])
    if not past:
        return []
    resp = responsibilities(study, [document, *past])
    mine = resp[document.pk].failure_type
    out: list[Similar] = []
    if mine:
        same = [d for d in past if resp[d.pk].failure_type == mine]
        out += [Similar(d, f"same type {mine}", 1.0) for d in same[:limit]]
    seen = {s.document.pk for s in out}
    texts = [f"{d.title}\n{d.body[:5000]}" for d in [document, *past]]
    vectors = text_vectors(study.codebook, texts)
    scores = np.asarray((vectors[1:] @ vectors[0].T).todense()).ravel()
    for i in np.argsort(-scores, kind="stable"):
        if len(out) >= 2 * limit or scores[i] <= 0.05:
            break
        if past[i].pk not in seen:
            out.append(Similar(past[i], f"text similarity {scores[i]:.2f}", float(scores[i])))
    return out
