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


@transaction.atomic
def incident_create(*, study: Study, user, data: IncidentData) -> IncidentResult:
    """Store an incident as a Document with an Episode and Artifacts, and queue a suggestion. All or nothing.

    An incident sent again with the same external_id is not duplicated: the
    stored one is returned with created=False.
    """
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
    if to_status not in TriageStatus.values:
        errors["status"] = f"Status must be one of {', '.join(TriageStatus.values)}."
    elif to_status not in TRANSITIONS[from_status]:
        errors["status"] = f"An incident that is {from_status} cannot move to {to_status}."
    assignee = assignee if assignee is not None else current.assignee
    if to_status == TriageStatus.TRIAGED and assignee is None:
        errors["assignee"] = "Choose who handles it."
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
        from annotate.incidents.webhooks import webhook_event_send

        webhook_event_send(study=study, document=current, event="incident.triaged", payload=_event(current, event))
    return event


def _event(document: Document, event: TriageEvent) -> dict[str, Any]:
    from annotate.incidents.selectors import responsibilities

    r = responsibilities(document.study, [document])[document.pk]
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
