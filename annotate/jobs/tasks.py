"""The one Celery task of the job runner. Its name is pinned: queued messages and beat name it."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from annotate.jobs.runner import job_run


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
