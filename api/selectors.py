"""Reads behind the API's list and detail endpoints, with their joins applied.

Every study-scoped queryset starts from the study the permission class
resolved, so no list can reach another study's rows.
"""

from __future__ import annotations

from django.db.models import F, Prefetch, Q, QuerySet

from annotate.coding.visibility import coding_visibility
from annotate.models import (
    Artifact,
    Coding,
    Document,
    DocumentKind,
    Episode,
    Job,
    Membership,
    Study,
    TriageEvent,
)
from taxonomy.models import Codebook, FailureType
from taxonomy.selectors import codebooks_for


def codebooks(user) -> QuerySet[Codebook]:
    """Shared codebooks, and the private ones of the user's studies (taxonomy.selectors.codebooks_for)."""
    return codebooks_for(user)


def codebook_types(codebook: Codebook) -> QuerySet[FailureType]:
    return FailureType.objects.filter(codebook=codebook).select_related("category")


def studies_for(user) -> QuerySet[Study]:
    """The user's studies, each annotated with the user's role as `my_role`."""
    return (
        Study.objects.filter(memberships__user=user).annotate(my_role=F("memberships__role")).select_related("codebook")
    )


def documents(study: Study) -> QuerySet[Document]:
    return Document.objects.filter(study=study).select_related("assignee")


def episodes(study: Study) -> QuerySet[Episode]:
    return Episode.objects.filter(study=study).select_related("document")


def codings_visible(membership: Membership) -> QuerySet[Coding]:
    """A study's codings as this member may see them (annotate.coding.visibility decides)."""
    qs = Coding.objects.filter(episode__study_id=membership.study_id).select_related(
        "coder", "failure_type", "source", "stage", "capability"
    )
    return coding_visibility(membership).codings(qs)


def jobs_visible(user) -> QuerySet[Job]:
    """Jobs of the user's studies, and the user's own jobs without a study.

    Where blinding keeps everyone's codings from a member (annotate.coding.visibility), they see
    only the jobs they started: others' jobs carry reports of everyone's codings.
    """
    memberships = Membership.objects.filter(user=user).select_related("study")
    full = [m.study_id for m in memberships if coding_visibility(m).sees_aggregates]
    member_of = [m.study_id for m in memberships]
    mine = Q(created_by=user) & (Q(study__isnull=True) | Q(study_id__in=member_of))
    return Job.objects.filter(Q(study_id__in=full) | mine).select_related("study")


def incidents_for(user) -> QuerySet[Document]:
    """Incident documents of the user's studies, with their study and assignee."""
    return (
        Document.objects.filter(kind=DocumentKind.INCIDENT, study__memberships__user=user)
        .select_related("study", "assignee")
        .prefetch_related(
            Prefetch("artifacts", queryset=Artifact.objects.select_related("step").order_by("id")),
            Prefetch("triage_events", queryset=TriageEvent.objects.select_related("actor", "assignee")),
            Prefetch("episodes", queryset=Episode.objects.order_by("order")),
        )
    )
