"""Incident intake and triage: an incident becomes a Document (kind incident) with one Episode.

Incident text, traces and artifacts come from other systems and are hostile
input: they are size-limited here and only ever rendered through
annotate.documents.render (Markdown) or as escaped text.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone

from annotate.documents.render import safe_link
from annotate.imports.parsed import unstorable_at
from annotate.models import (
    Artifact,
    Document,
    DocumentKind,
    Episode,
    Job,
    Membership,
    Role,
    Study,
    TriageEvent,
    TriageStatus,
)
from annotate.studies.services import queue_key_for, study_data_changed
from annotate.traces.parsed import TraceArtifact, trace_summary
from annotate.traces.services import artifacts_link, steps_write, trace_steps_of_value

log = logging.getLogger(__name__)

SEVERITIES = ("critical", "high", "medium", "low", "info")
MAX_DESCRIPTION = 200_000
MAX_TRACE_BYTES = 1_000_000
MAX_ARTIFACTS = 20
MAX_ARTIFACT_CHARS = 1_000_000
MAX_ARTIFACTS_TOTAL = 5_000_000
MAX_NOTE = 5_000

# Where an incident may go from each status. Resolved incidents can be reopened.
TRANSITIONS = {
    TriageStatus.NEW: {TriageStatus.TRIAGED, TriageStatus.RESOLVED},
    TriageStatus.TRIAGED: {TriageStatus.RESOLVED, TriageStatus.NEW, TriageStatus.TRIAGED},
    TriageStatus.RESOLVED: {TriageStatus.TRIAGED},
}


@dataclass(frozen=True)
class IncidentData:
    service: str
    title: str
    description: str
    occurred_at: datetime | None = None
    severity: str = ""
    trace: Any = None
    artifacts: tuple[TraceArtifact, ...] = field(default_factory=tuple)
    external_id: str = ""


@dataclass(frozen=True)
class IncidentResult:
    document: Document
    episode: Episode
    created: bool
    suggestion_job: Job | None


def incident_validate(data: IncidentData) -> None:
    """Field errors for a bad incident (sizes, severity, artifact kinds); raises ValidationError."""
    errors: dict[str, str] = {}
    if not data.service.strip() or len(data.service) > 300:
        errors["service"] = "Name the service or agent (1-300 characters)."
    if not data.title.strip() or len(data.title) > 1000:
        errors["title"] = "Give a title (1-1000 characters)."
    if not data.description.strip() or len(data.description) > MAX_DESCRIPTION:
        errors["description"] = f"Describe the incident (1-{MAX_DESCRIPTION} characters)."
    if data.severity and data.severity not in SEVERITIES:
        errors["severity"] = f"Severity must be one of {', '.join(SEVERITIES)}."
    if data.trace is not None and len(json.dumps(data.trace)) > MAX_TRACE_BYTES:
        errors["trace"] = f"The trace is larger than {MAX_TRACE_BYTES} bytes as JSON."
    elif data.trace is not None and (where := unstorable_at(data.trace)):
        # A trace is kept as sent, so it is refused rather than silently changed.
        errors["trace"] = (
            f"The trace holds a NUL character or an unpaired surrogate escape at {where[:200]}; "
            "send valid Unicode text without NUL."
        )
    if len(data.artifacts) > MAX_ARTIFACTS:
        errors["artifacts"] = f"At most {MAX_ARTIFACTS} artifacts."
    elif sum(len(a.content) for a in data.artifacts) > MAX_ARTIFACTS_TOTAL:
        errors["artifacts"] = f"Artifacts hold more than {MAX_ARTIFACTS_TOTAL} characters in all."
    for n, a in enumerate(data.artifacts):
        if a.kind not in Artifact.Kind.values:
            errors[f"artifacts[{n}].kind"] = f"Kind must be one of {', '.join(Artifact.Kind.values)}."
        if bool(a.content) == bool(a.url):
            errors[f"artifacts[{n}]"] = "Give either content or a url."
        if len(a.content) > MAX_ARTIFACT_CHARS:
            errors[f"artifacts[{n}].content"] = f"At most {MAX_ARTIFACT_CHARS} characters."
        if a.url and not safe_link(a.url):
            errors[f"artifacts[{n}].url"] = "Only http and https links."
        if (a.span_id or a.step is not None) and data.trace is None:
            errors[f"artifacts[{n}]"] = "span_id and step name a step of the trace: send the trace too."
    if errors:
        raise ValidationError(errors)


def _queue_suggestion(study: Study, user, episode: Episode) -> Job | None:
    """Queue a suggestion for the new episode; intake never fails because the suggester cannot run."""
    from annotate.suggestions.services import suggestion_batch_start

    try:
        return suggestion_batch_start(study=study, user=user, episode_ids=[episode.pk])
    except ValidationError:
        log.warning("could not queue a suggestion for incident episode %s", episode.pk, exc_info=True)
        return None


def _incident_stored(study: Study, external_id: str) -> IncidentResult | None:
    document = Document.objects.filter(study=study, kind=DocumentKind.INCIDENT, external_id=external_id).first()
    if document is None:
        return None
    return IncidentResult(document, document.episodes.order_by("order").first(), False, None)


def _incident_document_create(study: Study, user, data: IncidentData) -> Document:
    return Document.objects.create(
        study=study,
        kind=DocumentKind.INCIDENT,
        external_id=data.external_id or f"inc-{uuid.uuid4().hex[:16]}",
        cluster=data.service.strip(),
        title=data.title.strip(),
        body=data.description,
        triage_status=TriageStatus.NEW,
        severity=data.severity,
        occurred_at=data.occurred_at,
        meta={"service": data.service.strip(), "severity": data.severity, "reported_by": user.get_username()},
        raw={"trace": data.trace} if data.trace is not None else {},
    )


def incident_intake_check(*, study: Study, user) -> None:
    """Refuse an incident for a study that does not accept incidents (ValidationError on "study").

    The one rule for where incidents may go: an incident becomes an episode of the study's coding
    queue, so only a study that accepts incidents (an incident study, or one whose owner opted in)
    takes them; a research study's coders never find incidents among their episodes. The message
    names the studies this user could post to instead, and how an owner opts in.
    """
    if study.accepts_incidents:
        return
    open_to_user = list(
        Study.objects.filter(
            accepts_incidents=True, memberships__user=user, memberships__role__in=(Role.OWNER, Role.CODER)
        ).values_list("slug", flat=True)[:5]
    )
    where = (
        f"Post it to a study that accepts incidents ({', '.join(open_to_user)})"
        if open_to_user
        else "Post it to an incident study"
    )
    raise ValidationError(
        {
            "study": (
                f"The study '{study.slug}' does not accept incidents: its episodes are coded by its research "
                f"coders, and an incident would join their queue. {where}, or ask an owner of '{study.slug}' to "
                f"turn on “Accept incidents” in its incident settings (/studies/{study.slug}/settings/webhook/)."
            )
        }
    )


@transaction.atomic
def incident_create(*, study: Study, user, data: IncidentData) -> IncidentResult:
    """Store an incident as a Document with an Episode and Artifacts, and queue a suggestion. All or nothing.

    Only a study that accepts incidents takes one (incident_intake_check). An incident sent again
    with the same external_id is not duplicated: the stored one is returned with created=False.
    """
    incident_intake_check(study=study, user=user)
    incident_validate(data)
    steps = trace_steps_of_value(data.trace) if data.trace is not None else []
    if data.external_id:
        stored = _incident_stored(study, data.external_id)
        if stored is not None:
            return stored
    try:
        # A savepoint: a sender retrying at once may insert the same external_id first.
        with transaction.atomic():
            document = _incident_document_create(study, user, data)
    except IntegrityError:
        stored = _incident_stored(study, data.external_id) if data.external_id else None
        if stored is None:
            raise
        return stored
    episode = Episode.objects.create(document=document, study=study)
    Episode.objects.filter(pk=episode.pk).update(queue_key=queue_key_for(study, episode.pk))
    if steps:
        steps_write(document_id=document.pk, steps=steps)
        Document.objects.filter(pk=document.pk).update(meta={**document.meta, "trace": trace_summary(steps)})
    artifacts_link(
        document=document,
        artifacts=list(data.artifacts),
    )
    TriageEvent.objects.create(document=document, actor=user, from_status="", to_status=TriageStatus.NEW)
    study_data_changed(study_id=study.pk)
    return IncidentResult(document, episode, True, _queue_suggestion(study, user, episode))


def _assignable(study: Study, assignee) -> bool:
    return Membership.objects.filter(study=study, user=assignee, role__in=(Role.OWNER, Role.CODER)).exists()


def _transition_error(from_status: str, to_status: str, assignee) -> tuple[str, str] | None:
    """(field, message) saying why an incident cannot go from_status -> to_status with this assignee."""
    if to_status not in TriageStatus.values:
        return "status", f"Status must be one of {', '.join(TriageStatus.values)}."
    if to_status not in TRANSITIONS[from_status]:
        return "status", f"An incident that is {from_status} cannot move to {to_status}."
    if to_status == TriageStatus.TRIAGED and assignee is None:
        return "assignee", "Choose who handles it."
    return None


@transaction.atomic
def incident_move(*, document: Document, user, to_status: str, assignee=None, note: str = "") -> TriageEvent:
    """Move an incident (new -> triaged -> resolved, or reopen) and record who did it and when.

    Triaging needs an assignee, a coder or owner of the study. Moving to
    triaged sends the study's webhook (signed, retried) once committed.
    """
    current = Document.objects.select_for_update().get(pk=document.pk, kind=DocumentKind.INCIDENT)
    study = current.study
    from_status = current.triage_status or TriageStatus.NEW
    errors: dict[str, str] = {}
    assignee = assignee if assignee is not None else current.assignee
    if why := _transition_error(from_status, to_status, assignee):
        errors[why[0]] = why[1]
    elif assignee is not None and not _assignable(study, assignee):
        errors["assignee"] = "The assignee must be a coder or owner of this study."
    if len(note) > MAX_NOTE:
        errors["note"] = f"At most {MAX_NOTE} characters."
    if errors:
        raise ValidationError(errors)
    Document.objects.filter(pk=current.pk).update(triage_status=to_status, assignee=assignee, updated_at=timezone.now())
    document.triage_status, document.assignee = to_status, assignee
    event = TriageEvent.objects.create(
        document=current, actor=user, from_status=from_status, to_status=to_status, assignee=assignee, note=note
    )
    if to_status == TriageStatus.TRIAGED and study.webhook_url:
        _triaged_webhooks(study, [(current, event)])
    return event


BULK_ACTIONS = ("assign", "move", "close")
MAX_BULK = 500


def _bulk_target(action: str, from_status: str, to_status: str) -> str:
    """The status a selected incident goes to: assigning triages a new incident and keeps a triaged one."""
    if action == "close":
        return TriageStatus.RESOLVED
    if action == "assign":
        return TriageStatus.TRIAGED if from_status in (TriageStatus.NEW, TriageStatus.TRIAGED) else ""
    return to_status


def _bulk_request_errors(study: Study, ids: list[int], action: str, to_status: str, assignee, note: str) -> dict:
    errors: dict[str, str] = {}
    if not ids:
        errors["incidents"] = "Select at least one incident."
    elif len(ids) > MAX_BULK:
        errors["incidents"] = f"At most {MAX_BULK} incidents at once."
    if action not in BULK_ACTIONS:
        errors["action"] = f"Action must be one of {', '.join(BULK_ACTIONS)}."
    elif action == "assign" and assignee is None:
        errors["assignee"] = "Choose whom to assign them to."
    elif action == "move" and to_status not in TriageStatus.values:
        errors["status"] = f"Choose where to move them: {', '.join(TriageStatus.values)}."
    if assignee is not None and not _assignable(study, assignee):
        errors["assignee"] = "The assignee must be a coder or owner of this study."
    if len(note) > MAX_NOTE:
        errors["note"] = f"At most {MAX_NOTE} characters."
    return errors


@transaction.atomic
def incidents_bulk_move(
    *, study: Study, user, document_ids: list[int], action: str, to_status: str = "", assignee=None, note: str = ""
) -> list[TriageEvent]:
    """Assign, move or close several incidents in one transaction: all of them or none.

    assign: every selected incident gets `assignee`; new ones become triaged, triaged ones are
    reassigned, resolved ones are refused (reopen them first). move: each goes to `to_status` by
    the same transitions as one move (to triaged it needs an assignee, given or its own). close:
    each becomes resolved. Every change is a TriageEvent in the history; incidents that become
    triaged send the study's webhook. A fixed number of queries however many are selected.
    """
    ids = sorted({int(i) for i in document_ids})
    if errors := _bulk_request_errors(study, ids, action, to_status, assignee, note):
        raise ValidationError(errors)
    docs = list(
        # Lock the incidents only: PostgreSQL cannot lock the nullable side of the assignee's outer join.
        Document.objects.select_for_update(of=("self",))
        .filter(study=study, kind=DocumentKind.INCIDENT, pk__in=ids)
        .select_related("assignee")
        .order_by("pk")
    )
    if missing := sorted(set(ids) - {d.pk for d in docs}):
        raise ValidationError({"incidents": f"Not incidents of this study: {', '.join(map(str, missing[:20]))}."})
    moves, refused = [], []
    for d in docs:
        from_status = d.triage_status or TriageStatus.NEW
        target = _bulk_target(action, from_status, to_status)
        after = assignee if assignee is not None else d.assignee
        why = _transition_error(from_status, target, after) if target else ("status", "resolved: reopen it first.")
        if why:
            refused.append(f"#{d.pk} “{d.title[:60]}”: {why[1]}")
        moves.append((d, from_status, target, after))
    if refused:
        raise ValidationError({"incidents": [f"Nothing was changed. {len(refused)} of {len(docs)} cannot:", *refused]})
    changes = {"updated_at": timezone.now()}
    if assignee is not None:
        changes["assignee"] = assignee
    targets = {target for _, _, target, _ in moves}
    for target in targets:  # one UPDATE: every action sends all its incidents to one status
        Document.objects.filter(pk__in=[d.pk for d, _, t, _ in moves if t == target]).update(
            triage_status=target, **changes
        )
    events = TriageEvent.objects.bulk_create(
        [TriageEvent(document=d, actor=user, from_status=f, to_status=t, assignee=a, note=note) for d, f, t, a in moves]
    )
    triaged = [(d, e) for (d, _, t, _), e in zip(moves, events, strict=True) if t == TriageStatus.TRIAGED]
    if triaged and study.webhook_url:
        _triaged_webhooks(study, triaged)
    return events


def incident_transfer_targets(*, study: Study, user) -> list[Study]:
    """Studies `user` may move this study's incidents to: other studies that accept incidents, use the same
    codebook (suggestions and codes point into it) and where the user codes or owns. Empty unless the
    user owns this study: moving documents out of a study is an owner's decision."""
    owns = Membership.objects.filter(study=study, user=user, role=Role.OWNER)
    return list(
        Study.objects.filter(
            Exists(owns),
            accepts_incidents=True,
            codebook_id=study.codebook_id,
            memberships__user=user,
            memberships__role__in=(Role.OWNER, Role.CODER),
        )
        .exclude(pk=study.pk)
        .order_by("name")
    )


def _transfer_refusals(study: Study, target: Study, docs: list[Document]) -> list[str]:
    """Why some incidents cannot leave `study` for `target` (codings, live coding, a clashing external_id)."""
    from annotate.models import Adjudication, CodingExposure, Lease

    episodes = Episode.objects.filter(document__in=docs)
    coded = set(episodes.filter(n_codings__gt=0).values_list("document_id", flat=True))
    coded |= set(Adjudication.objects.filter(episode__in=episodes).values_list("episode__document_id", flat=True))
    busy = set(
        Lease.objects.filter(episode__in=episodes, expires_at__gt=timezone.now()).values_list(
            "episode__document_id", flat=True
        )
    )
    busy |= set(CodingExposure.objects.filter(episode__in=episodes).values_list("episode__document_id", flat=True))
    clash = set(
        Document.objects.filter(
            study=target, kind=DocumentKind.INCIDENT, external_id__in=[d.external_id for d in docs]
        ).values_list("external_id", flat=True)
    )
    out = []
    for d in docs:
        if d.pk in coded:
            out.append(f"#{d.pk} “{d.title[:60]}”: coded in {study.slug}; its codings stay with that study.")
        elif d.pk in busy:
            out.append(f"#{d.pk} “{d.title[:60]}”: a coder of {study.slug} has opened it; it stays.")
        elif d.external_id in clash:
            out.append(f"#{d.pk} “{d.title[:60]}”: {target.slug} already has an incident {d.external_id}.")
    return out


@transaction.atomic
def incidents_transfer(*, study: Study, user, document_ids: list[int], target: Study, note: str = "") -> int:
    """Move incidents (with their episode, suggestions, trace and artifacts) to another study. All or none.

    For an incident posted to the wrong study, e.g. a research study from before studies had to
    accept incidents: it leaves that study's queue and joins the target's (a fresh place in its
    random order). Only the owner of `study`, to a study in incident_transfer_targets; only
    incidents nobody has coded or opened for coding there. Each move is a TriageEvent with a note.
    """
    ids = sorted({int(i) for i in document_ids})
    if not ids or len(ids) > MAX_BULK:
        raise ValidationError({"incidents": f"Select between 1 and {MAX_BULK} incidents."})
    if len(note) > MAX_NOTE:
        raise ValidationError({"note": f"At most {MAX_NOTE} characters."})
    if target.pk not in {s.pk for s in incident_transfer_targets(study=study, user=user)}:
        raise ValidationError(
            {
                "study": f"Incidents of {study.slug} can go only to another study that accepts incidents, uses the "
                "same codebook and where you code; and only its owner moves them."
            }
        )
    docs = list(
        Document.objects.select_for_update(of=("self",))
        .filter(study=study, kind=DocumentKind.INCIDENT, pk__in=ids)
        .order_by("pk")
    )
    if missing := sorted(set(ids) - {d.pk for d in docs}):
        raise ValidationError({"incidents": f"Not incidents of this study: {', '.join(map(str, missing[:20]))}."})
    if refused := _transfer_refusals(study, target, docs):
        raise ValidationError({"incidents": [f"Nothing was moved. {len(refused)} of {len(docs)} cannot:", *refused]})
    Document.objects.filter(pk__in=ids).update(study=target, updated_at=timezone.now())
    # An assignee who does not code in the target study cannot handle the incident there.
    members = set(
        Membership.objects.filter(study=target, role__in=(Role.OWNER, Role.CODER)).values_list("user_id", flat=True)
    )
    dropped = [d.pk for d in docs if d.assignee_id is not None and d.assignee_id not in members]
    if dropped:
        Document.objects.filter(pk__in=dropped).update(assignee=None)
    episodes = list(Episode.objects.filter(document_id__in=ids).only("pk"))
    for episode in episodes:
        episode.study, episode.queue_key = target, queue_key_for(target, episode.pk)
    Episode.objects.bulk_update(episodes, ["study", "queue_key"])
    study_data_changed(study_id=study.pk)
    study_data_changed(study_id=target.pk)
    said = f"Moved from {study.slug} to {target.slug}." + (f" {note}" if note else "")
    events = [
        TriageEvent(
            document=d,
            actor=user,
            from_status=d.triage_status,
            to_status=d.triage_status,
            note=said,
            assignee_id=None if d.pk in dropped else d.assignee_id,
        )
        for d in docs
    ]
    TriageEvent.objects.bulk_create(events)
    return len(docs)


def _triaged_webhooks(study: Study, moved: list[tuple[Document, TriageEvent]]) -> None:
    """Queue the incident.triaged event of each moved incident (sent once the transaction commits)."""
    from annotate.incidents.selectors import responsibilities
    from annotate.incidents.webhooks import webhook_event_send

    found = responsibilities(study, [d for d, _ in moved])
    for document, event in moved:
        payload = _event(document, event, found[document.pk])
        webhook_event_send(study=study, document=document, event="incident.triaged", payload=payload)


def _event(document: Document, event: TriageEvent, r) -> dict[str, Any]:
    return {
        "responsibility": {
            "state": r.state,
            "source": r.source or None,
            "failure_type": r.failure_type or None,
            "confidence": r.confidence,
        },
        "incident": {
            "id": document.pk,
            "external_id": document.external_id,
            "title": document.title,
            "service": document.cluster,
            "severity": document.severity,
            "status": event.to_status,
            "previous_status": event.from_status,
            "assignee": event.assignee.get_username() if event.assignee else None,
            "occurred_at": document.occurred_at.isoformat() if document.occurred_at else None,
        },
        "actor": event.actor.get_username() if event.actor else None,
        "note": event.note,
        "at": event.created_at.isoformat(),
    }
