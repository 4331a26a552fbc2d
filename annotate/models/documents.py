"""What is coded: documents (issues, papers, traces, incidents), their episodes, and triage events."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.models.studies import Study
from lib.db.fields import StoredJSONField


class DocumentKind(models.TextChoices):
    GITHUB_ISSUE = "github_issue", "GitHub issue"
    LITERATURE = "literature", "Literature record"
    INCIDENT = "incident", "Incident"
    TRACE = "trace", "Agent trace"


class TriageStatus(models.TextChoices):
    NEW = "new", "New"
    TRIAGED = "triaged", "Triaged"
    RESOLVED = "resolved", "Resolved"


class Document(models.Model):
    # No index of its own: every index below starts with study_id, and each one more costs every import.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="documents", db_index=False)
    kind = models.CharField(max_length=20, choices=DocumentKind.choices)
    external_id = models.CharField(max_length=500)
    url = models.URLField(max_length=1000, blank=True)
    # The resampling unit: repository owner/name, citation key or DOI, or service.
    cluster = models.CharField(max_length=300)
    title = models.CharField(max_length=1000)
    body = models.TextField(blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # The imported item's other fields as given, read back whole (a trace, the admin): `json` on PostgreSQL,
    # which an import writes for a third of what `jsonb` costs (lib.db.fields.StoredJSONField).
    raw = StoredJSONField(default=dict, blank=True)
    # Labels (GitHub labels, incident tags) as ",a,b,", so one indexed-friendly
    # `icontains=",a,"` filters by label on every database.
    labels = models.CharField(max_length=2000, blank=True)
    # sha256 of the normalised imported fields, so a re-import can tell
    # "unchanged" from "updated" without comparing bodies row by row.
    content_hash = models.CharField(max_length=64, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Incident triage (kind=incident only).
    triage_status = models.CharField(max_length=10, choices=TriageStatus.choices, blank=True)
    # Indexed only where set (document_assignee_idx): imports write NULL, which costs no index entry.
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_incidents",
        db_index=False,
    )
    severity = models.CharField(max_length=20, blank=True)
    occurred_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "kind", "external_id"], name="document_study_kind_extid_unique")
        ]
        indexes = [
            models.Index(fields=["study", "kind", "cluster"]),
            models.Index(fields=["study", "cluster"]),
            models.Index(fields=["study", "triage_status"]),
            # Keyset pages of a study's documents, and a search's newest matches, without walking other studies.
            models.Index(fields=["study", "id"], name="document_study_id_idx"),
            # Deleting a user sets their incidents' assignee to NULL; the few assigned rows are all indexed.
            models.Index(fields=["assignee"], condition=Q(assignee__isnull=False), name="document_assignee_idx"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.external_id}"


class Split(models.TextChoices):
    PRIMARY = "primary", "Primary"
    HOLDOUT = "holdout", "Hold-out"
    # Left out of analysis and hold-out coverage by an owner, e.g. a whole-document episode
    # that was split into smaller ones after it had been coded. Its codings are kept.
    EXCLUDED = "excluded", "Excluded"


class EpisodeStatus(models.TextChoices):
    OPEN = "open", "Open"  # fewer than k codings
    CODED = "coded", "Coded"  # k codings
    ADJUDICATED = "adjudicated", "Adjudicated"


class Episode(models.Model):
    # Neither key has an index of its own: episode_document_order_unique starts with document_id,
    # and every index below starts with study_id; each one more costs every import.
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    # Denormalised from document.study so the queue and analysis filter one table.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    excerpt = models.TextField(blank=True)  # empty means the whole document body
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    order = models.PositiveIntegerField(default=0)
    split = models.CharField(max_length=10, choices=Split.choices, default=Split.PRIMARY)
    status = models.CharField(max_length=12, choices=EpisodeStatus.choices, default=EpisodeStatus.OPEN)
    # Maintained by the coding service so the queue never counts rows per request.
    n_codings = models.PositiveIntegerField(default=0)
    # Position in the random queue order, derived from the study's stored seed.
    queue_key = models.BigIntegerField(default=0)
    # A published attribution that came with the imported file (Who&When's mistake agent and
    # step, MAST's annotators' failure modes). Never a coding; hidden from blind coders until
    # they have saved their own (annotate.coding.selectors.reference_visible).
    reference = models.JSONField(default=dict, blank=True)
    # The axes the codings differ on, one bit each (services/disagreement.py); 0 when they agree.
    # Maintained by the coding and adjudication services in their transaction.
    disagreement = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "order"], name="episode_document_order_unique")]
        indexes = [
            models.Index(fields=["study", "split", "n_codings", "queue_key"]),
            models.Index(fields=["study", "split", "n_codings", "id"]),
            models.Index(fields=["study", "status"]),
            # The adjudication list: disagreements are few, so the index holds only them.
            models.Index(
                fields=["study", "status", "id"], condition=Q(disagreement__gt=0), name="episode_disagreement_idx"
            ),
            # The documents list's "coded" filter: the study's coded documents, without reading its uncoded ones.
            models.Index(fields=["study", "document"], condition=Q(n_codings__gt=0), name="episode_coded_idx"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"episode {self.pk} of {self.document_id}"


class TriageEvent(models.Model):
    """Who moved an incident, from what to what, and when."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="triage_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    from_status = models.CharField(max_length=10, blank=True)
    to_status = models.CharField(max_length=10)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_status or '-'} → {self.to_status}"
