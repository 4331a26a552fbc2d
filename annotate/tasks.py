from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from annotate import analysis_tasks  # noqa: F401  (registers bootstrap_chunk with the worker)
from annotate.jobs import job_run


# A database that is down when the message arrives: try again later with the same message id
# (the job's recorded one), so beat keeps counting it as queued.
@shared_task(
    name="annotate.tasks.run_job",
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=None,
)
def run_job(job_id: int) -> None:
    """Run a job once. A copy of the message, or a redelivery, finds the job claimed and does nothing;
    failures are recorded on the job, and a worker that dies is replaced through the job's lease."""
    job_run(job_id=job_id)


@shared_task(name="annotate.tasks.deliver_webhook", bind=True, acks_late=True, max_retries=None)
def deliver_webhook(
    self, *, study_id: int, document_id: int | None, event: str, event_id: str, payload: dict, attempt: int
) -> bool:
    """One delivery attempt; a failed one is retried with exponential backoff up to the configured attempts."""
    from django.conf import settings

    from annotate.webhooks import webhook_attempt, webhook_backoff

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
