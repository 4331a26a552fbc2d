"""Reads shared by pages, the API and analysis."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, IntegerField, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from annotate.models import Document, Episode, EpisodeStatus, Membership, Split, Study


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


def study_counts(study: Study, *, visible: Q | None = None) -> StudyCounts:
    """Overview numbers in two aggregate queries, whatever the study's size.

    `visible` (annotate.coding.visibility's `episodes_q()`) limits the progress counts (coded,
    complete, adjudicated) to the episodes whose codings the member may see: a blind coder's
    "coded" is what they coded, not how far everyone else has got. None counts every episode.
    """
    docs = Document.objects.filter(study=study).values("kind").annotate(n=Count("id")).order_by("-n", "kind")
    by_kind = {row["kind"]: row["n"] for row in docs}
    seen = visible if visible is not None else Q()
    agg = Episode.objects.filter(study=study).aggregate(
        episodes=Count("id"),
        coded=Count("id", filter=Q(n_codings__gt=0) & seen),
        complete=Count("id", filter=Q(n_codings__gte=study.coders_per_episode) & seen),
        adjudicated=Count("id", filter=Q(status=EpisodeStatus.ADJUDICATED) & seen),
        holdout=Count("id", filter=Q(split=Split.HOLDOUT)),
    )
    return StudyCounts(documents=sum(by_kind.values()), by_kind=by_kind, **agg)


@dataclass(frozen=True)
class StudyJobs:
    active: list  # queued, running, stalled and retrying jobs, oldest first
    recent: list  # the latest finished ones, newest first


def study_jobs(study: Study, *, recent: int = 30) -> StudyJobs:
    """A study's jobs for its Jobs page: every unfinished one, and the `recent` latest finished ones."""
    from annotate.models import Job, JobStatus

    rows = Job.objects.filter(study=study).select_related("created_by").defer("params", "result", "checkpoint")
    active = rows.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).order_by("created_at", "pk")
    finished = rows.filter(status__in=[JobStatus.SUCCESS, JobStatus.FAILED]).order_by("-created_at", "-pk")
    return StudyJobs(active=list(active), recent=list(finished[:recent]))


def jobs_health(user=None, *, limit: int = 50) -> dict:
    """Job counts by state for /healthz; with a signed-in `user`, also their studies' unfinished jobs.

    Stalled means running with an expired lease (its worker stopped sending
    heartbeats); retrying means queued again after that.
    """
    from django.db.models import Min
    from django.utils import timezone

    from annotate.models import Job, JobStatus

    now = timezone.now()
    running = Q(status=JobStatus.RUNNING)
    expired = Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    counts = Job.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).aggregate(
        queued=Count("pk", filter=Q(status=JobStatus.PENDING, retry_reason="")),
        retrying=Count("pk", filter=Q(status=JobStatus.PENDING) & ~Q(retry_reason="")),
        running=Count("pk", filter=running & ~expired),
        stalled=Count("pk", filter=running & expired),
        oldest_queued=Min("created_at", filter=Q(status=JobStatus.PENDING)),
        oldest_heartbeat=Min("heartbeat_at", filter=running),
    )
    oldest_queued, oldest_heartbeat = counts.pop("oldest_queued"), counts.pop("oldest_heartbeat")
    counts["oldest_queued_s"] = round((now - oldest_queued).total_seconds(), 1) if oldest_queued else None
    counts["stalest_heartbeat_s"] = round((now - oldest_heartbeat).total_seconds(), 1) if oldest_heartbeat else None
    if user is None:
        return counts
    visible = Q(study__memberships__user=user) | Q(study__isnull=True, created_by=user)
    rows = (
        Job.objects.filter(visible, status__in=[JobStatus.PENDING, JobStatus.RUNNING])
        .select_related("study")
        .only(
            "pk",
            "kind",
            "status",
            "study__slug",
            "attempts",
            "done",
            "total",
            "heartbeat_at",
            "lease_expires_at",
            "retry_reason",
            "created_at",
        )
        .order_by("created_at", "pk")[:limit]
    )
    counts["jobs"] = [
        {
            "id": job.pk,
            "kind": job.kind,
            "study": job.study.slug if job.study else None,
            "state": job.state,
            "attempts": job.attempts,
            "done": job.done,
            "total": job.total,
            "last_heartbeat": job.heartbeat_at.isoformat() if job.heartbeat_at else None,
        }
        for job in rows
    ]
    return counts
