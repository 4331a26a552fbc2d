"""Job handlers of the suggestions package (suggest, retrain, audit), and its after-import hook: a study that
asks for it gets a suggestion batch for the episodes an import created."""

from __future__ import annotations

import logging
from typing import Any

from annotate.imports.hooks import on_imported
from annotate.jobs.registry import job_handler
from annotate.models import (
    Job,
)
from annotate.suggestions.services import (
    default_backend,
    local_model_train,
    suggester_audit_record,
    suggestion_batch_start,
    suggestions_make,
)

log = logging.getLogger(__name__)


@job_handler("audit")
def job_audit(*, job: Job, progress) -> dict[str, Any]:
    """Job handler: audit the study's suggester and record the result."""
    from annotate.suggestions.audit import suggester_audit

    progress(0, 1)
    report = suggester_audit(study=job.study, backend=(job.params or {}).get("backend") or default_backend())
    row = suggester_audit_record(study=job.study, report=report, user=job.created_by)
    progress(1, 1)
    return {"audit": row.pk, "passed": report.passed, "n_labels": report.n_labels}


@job_handler("suggest")
def job_suggest(*, job: Job, progress) -> dict[str, Any]:
    """Job handler: a suggestion batch."""
    params = job.params or {}
    return suggestions_make(
        study=job.study,
        backend=params.get("backend") or default_backend(),
        episode_ids=params.get("episode_ids"),
        limit=params.get("limit"),
        refresh=bool(params.get("refresh")),
        job=job,
        progress=progress,
    )


@job_handler("retrain")
def job_retrain(*, job: Job, progress) -> dict[str, Any]:
    """Job handler: retrain the study's local model."""
    progress(0, 1)
    row = local_model_train(study=job.study, job=job)
    progress(1, 1)
    return {"local_model": row.pk, "n_train": row.n_train, "trained_at": row.trained_at.isoformat()}


@on_imported
def suggestions_after_import(*, job) -> dict[str, Any]:
    """After an import that created episodes: queue suggestions for the new ones, if the study asks for it."""
    if not job.study.suggest_on_import:
        return {}
    try:
        return {"suggestion_job": suggestion_batch_start(study=job.study, user=job.created_by).pk}
    except Exception:  # a missing key or a broker hiccup must not undo a finished import
        log.warning("could not queue suggestions after import job %s", job.pk, exc_info=True)
        return {"suggestion_job": None}
