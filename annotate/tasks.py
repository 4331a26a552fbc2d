from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import analysis_tasks  # noqa: F401  (registers bootstrap_chunk with the worker)
from .jobs import job_run, jobs_requeue


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def run_job(self, job_id: int) -> None:
    job_run(job_id=job_id)


@shared_task
def requeue_pending_jobs() -> int:
    from django.conf import settings

    return jobs_requeue(older_than_s=settings.FAULTLINE_REQUEUE_AFTER_S)


@shared_task(bind=True, acks_late=True, max_retries=None)
def deliver_webhook(
    self, *, study_id: int, document_id: int | None, event: str, event_id: str, payload: dict, attempt: int
) -> bool:
    """One delivery attempt; a failed one is retried with exponential backoff up to the configured attempts."""
    from django.conf import settings

    from .webhooks import webhook_attempt, webhook_backoff

    delivery = webhook_attempt(
        study_id=study_id, document_id=document_id, event=event, event_id=event_id, payload=payload, attempt=attempt
    )
    if delivery is None or delivery.delivered:
        return delivery is not None
    if attempt >= settings.FAULTLINE_WEBHOOK_MAX_ATTEMPTS:
        return False
    kwargs = {"study_id": study_id, "document_id": document_id, "event": event, "event_id": event_id,
              "payload": payload, "attempt": attempt + 1}  # fmt: skip
    raise self.retry(countdown=webhook_backoff(attempt), kwargs=kwargs)
