"""Long work as Celery-backed Jobs: start one, run it, report its progress.

Each job kind maps to a handler `handler(*, job, progress) -> dict` named by
dotted path, so apps add kinds without import cycles. The handler does the
work through services; `progress(done, total)` updates the Job row that pages
poll and commands can mirror in a progress bar.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from django.db import DatabaseError, connection, connections, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from .models import Job, JobStatus

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]

# A handler returns this when it has handed the work on (a chord of Celery tasks)
# and a later task finishes the Job: `job_run` then leaves the Job running.
DEFERRED = object()

HANDLERS: dict[str, str] = {
    "recount": "annotate.services.studies.job_recount",
    "suggest": "annotate.services.suggestions.job_suggest",
    "retrain": "annotate.services.suggestions.job_retrain",
    "import": "annotate.services.imports.job_import",
    "import_traces": "annotate.services.traces.job_import_traces",
    "export_parquet": "annotate.services.datasets.job_export_parquet",
    "bootstrap": "annotate.analysis_tasks.job_bootstrap",
}


def job_start(*, kind: str, study=None, user=None, params: dict | None = None) -> Job:
    """Record a Job and enqueue it once the surrounding transaction commits."""
    if kind not in HANDLERS:
        raise ValueError(f"unknown job kind '{kind}'")
    job = Job.objects.create(kind=kind, study=study, created_by=user, params=params or {})
    transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


def job_enqueue(*, job_id: int) -> bool:
    """Send a job to the workers. If the broker is down the Job stays pending, and
    `jobs_requeue` (run by Celery beat) sends it again once the broker is back."""
    from .tasks import run_job

    try:
        run_job.delay(job_id)
    except Exception:  # kombu raises several transport-specific errors; all mean "not sent"
        log.warning("could not enqueue job %s; it stays pending and will be re-sent", job_id, exc_info=True)
        return False
    return True


def jobs_requeue(*, older_than_s: float = 60.0) -> int:
    """Re-send pending jobs that no worker has started, e.g. after a broker outage.

    Re-sending is safe: `job_run` never runs a finished job twice, and handlers
    are idempotent (imports upsert, suggestions are unique per cache key).
    """
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    ids = list(Job.objects.filter(status=JobStatus.PENDING, created_at__lt=cutoff).values_list("pk", flat=True))
    return sum(job_enqueue(job_id=pk) for pk in ids)


def job_progress_writer(job: Job, *, min_interval: float = 0.5) -> ProgressFn:
    """A progress callback that writes to the Job row at most every `min_interval` seconds."""
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < min_interval:
            return
        last[0] = now
        _progress_write(job.pk, done, total)
        job.done, job.total = done, total

    return progress


def _progress_write(job_id: int, done: int, total: int) -> None:
    """Write progress so that pollers see it while the job's own transaction is still open.

    Atomic jobs (an import is all or nothing) would hide progress written on their
    own connection until they commit, so on PostgreSQL the row is updated from a
    short-lived thread with a connection of its own. SQLite allows one writer at a
    time, so there progress is written in the job's transaction; with SQLite
    Celery runs eagerly anyway, inside the request that started the job.
    """
    if connection.vendor == "sqlite" or not connection.in_atomic_block:
        Job.objects.filter(pk=job_id).update(done=done, total=total)
        return

    def write() -> None:
        try:
            Job.objects.filter(pk=job_id).update(done=done, total=total)
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=write, name=f"job-{job_id}-progress")
    thread.start()
    thread.join()


def _internal(exc: BaseException) -> bool:
    """Errors whose text describes our database or encoder, not the user's input."""
    import sqlite3

    try:
        from psycopg import Error as DriverError
    except ImportError:  # a SQLite-only install
        DriverError = sqlite3.Error
    return isinstance(exc, DatabaseError | DriverError | sqlite3.Error | UnicodeError)


def job_error_text(job: Job, exc: BaseException) -> str:
    """What the job page shows for a failure: the message of an error about the input
    (a bad record, too few labels), never a database's own text, which names tables and
    bytes and helps nobody; the log keeps that, under the job's number."""
    if _internal(exc):
        return (
            f"The {job.kind} stopped on an internal error and wrote nothing. "
            f"The server log has the details under job {job.pk}."
        )
    return str(exc)[:4000]


def job_run(*, job_id: int) -> Job | None:
    """Run a job's handler once. A finished job is not run again (idempotent redelivery)."""
    claimed = (
        Job.objects.filter(pk=job_id)
        .exclude(status=JobStatus.SUCCESS)
        .update(status=JobStatus.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1, error="")
    )
    job = Job.objects.filter(pk=job_id).first()
    if not claimed or job is None:
        return job
    handler = import_string(HANDLERS[job.kind])
    try:
        result = handler(job=job, progress=job_progress_writer(job))
        if result is DEFERRED:
            job.refresh_from_db()
            return job
    except Exception as exc:  # the job records any failure; the worker stays up
        log.exception("job %s (%s) failed", job.pk, job.kind)
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.FAILED, error=job_error_text(job, exc), finished_at=timezone.now()
        )
    else:
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.SUCCESS, result=result, finished_at=timezone.now(), done=F("total")
        )
    job.refresh_from_db()
    return job
