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
    return jobs_requeue()
