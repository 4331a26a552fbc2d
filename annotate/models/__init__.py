"""Every model of the annotate app, one module per sub-domain, re-exported here (as Zulip's zerver/models/).

The app label stays `annotate` and no table name changed: moving the classes changed no migration state.
Import from `annotate.models`; the modules are how the file is read, not an API.
"""

from __future__ import annotations

from annotate.models.analysis import AnalysisResult, ResultKind
from annotate.models.codebook_moves import CodebookMigration, MigratedCode
from annotate.models.coding import Adjudication, Coding, CodingExposure, Confidence, ExposureArm, FirstChoice, Lease
from annotate.models.documents import Document, DocumentKind, Episode, EpisodeStatus, Split, TriageEvent, TriageStatus
from annotate.models.jobs import Job, JobStatus
from annotate.models.studies import ApiToken, Invitation, LabelRule, Membership, QueueOrder, Role, Study, TokenScope
from annotate.models.suggestions import (
    LocalModel,
    SuggesterAudit,
    Suggestion,
    SuggestionBackend,
    SuggestionRejection,
    SuggestionStatus,
)
from annotate.models.traces import Artifact, StepKind, StepStatus, TraceStep
from annotate.models.webhooks import WebhookDelivery

__all__ = [
    "Adjudication",
    "AnalysisResult",
    "ApiToken",
    "Artifact",
    "CodebookMigration",
    "Coding",
    "CodingExposure",
    "Confidence",
    "Document",
    "DocumentKind",
    "Episode",
    "EpisodeStatus",
    "ExposureArm",
    "FirstChoice",
    "Invitation",
    "Job",
    "JobStatus",
    "LabelRule",
    "Lease",
    "LocalModel",
    "Membership",
    "MigratedCode",
    "QueueOrder",
    "ResultKind",
    "Role",
    "Split",
    "StepKind",
    "StepStatus",
    "Study",
    "SuggesterAudit",
    "Suggestion",
    "SuggestionBackend",
    "SuggestionRejection",
    "SuggestionStatus",
    "TokenScope",
    "TraceStep",
    "TriageEvent",
    "TriageStatus",
    "WebhookDelivery",
]
