"""Reads shared by pages, the API and analysis."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, IntegerField, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from .models import Document, Episode, EpisodeStatus, Membership, Split, Study


def count_per_outer_row(rows: QuerySet, key: str) -> Coalesce:
    """An expression: how many of `rows` (already filtered on OuterRef("pk")) belong to the outer row, 0 if none.

    `key` is the field that refers to the outer row, so the count is grouped by it alone.
    """
    counted = rows.order_by().values(key).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def memberships_for_user(user) -> QuerySet[Membership]:
    """The user's memberships with their studies and codebooks, for the study list."""
    return (
        Membership.objects.filter(user=user)
        .select_related("study", "study__codebook")
        .annotate(n_episodes=Count("study__episodes", distinct=True))
        .order_by("study__name")
    )


def studies_for_user(user) -> QuerySet[Study]:
    return Study.objects.filter(memberships__user=user).select_related("codebook")


@dataclass(frozen=True)
class StudyCounts:
    documents: int
    episodes: int
    coded: int  # at least one coding
    complete: int  # k or more codings
    adjudicated: int
    holdout: int
    by_kind: dict[str, int]


def study_counts(study: Study) -> StudyCounts:
    """Overview numbers in two aggregate queries, whatever the study's size."""
    docs = Document.objects.filter(study=study).values("kind").annotate(n=Count("id"))
    by_kind = {row["kind"]: row["n"] for row in docs}
    agg = Episode.objects.filter(study=study).aggregate(
        episodes=Count("id"),
        coded=Count("id", filter=Q(n_codings__gt=0)),
        complete=Count("id", filter=Q(n_codings__gte=study.coders_per_episode)),
        adjudicated=Count("id", filter=Q(status=EpisodeStatus.ADJUDICATED)),
        holdout=Count("id", filter=Q(split=Split.HOLDOUT)),
    )
    return StudyCounts(documents=sum(by_kind.values()), by_kind=by_kind, **agg)
