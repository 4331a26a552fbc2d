"""Long work as Celery-backed Jobs: start one, hand it to a worker, run it exactly once, report its progress.

Each job kind maps to a handler `handler(*, job, progress) -> dict`, registered
with `@job_handler("kind")` (annotate.jobs.registry), so packages add kinds
without the runner importing them. The handler does the
work through services; `progress(done, total)` updates the Job row that pages
poll and commands can mirror in a progress bar.

The lifecycle (docs/deploy.md tells operators what each state looks like):

- **pending**: stored, with at most one `run_job` message queued for it. The
  message's id is on the row (`message_id`) and, on a Redis broker, in a
  witness key next to the queue, so beat can tell a queued message from one
  the broker lost and re-sends only the lost ones.
- **claimed / running**: a worker took it with one conditional UPDATE from
  pending, which also gives it a lease (`lease_owner`, `lease_expires_at`) for
  FAULTLINE_JOB_LEASE_S. A heartbeat renews the lease while the handler runs.
  Any other delivery of the job finds it no longer pending and does nothing.
- **stalled**: running with an expired lease: its worker died or lost the
  database. Beat (`jobs_tend`) puts it back to pending with the reason
  "worker lost" and sends it again; after FAULTLINE_JOB_MAX_ATTEMPTS claims
  it fails instead of looping.
- **success / failed**: written only by the lease holder.

Handlers that do a lot of work record how far they got with
`job_checkpoint_save` inside the transaction of each piece of work. That write
is fenced by the lease: a worker that lost its lease cannot commit, and the
worker that took over resumes from the last committed checkpoint.

`job_started` is sent each time a job's work starts, so whatever watches the
workers (metrics, the fault tests' run counter) counts runs without reading
the Job row. The app itself connects no receiver to it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections, transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone

from annotate.jobs.registry import handler_for, task_named
from annotate.models import Job, JobStatus

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]

# A handler returns this when it has handed the work on (a chord of Celery tasks)
# and a later task finishes the Job: `job_run` then leaves the Job running, leased to
# those tasks for DEFERRED_LEASE_S at a time (each finished piece renews it).
DEFERRED = object()
DEFERRED_LEASE_S = 3600

# The job runner's task (annotate/jobs/tasks.py), looked up by its pinned name: that module imports this one.
RUN_JOB = "annotate.tasks.run_job"

WORKER_LOST = "worker lost"

# Sent by `job_run` in the worker once a delivery has claimed a job, just before its handler runs: once per run
# of the job's work (a job retried after its worker died sends it again; a delivery that finds the job claimed
# or finished sends nothing). Keyword argument: `job`, the claimed Job (sender: the Job class). A receiver that
# raises is logged and never stops the job.
job_started = Signal()
WITNESS_PREFIX = "faultline:job-message:"


class LeaseLost(RuntimeError):
    """This worker no longer holds the job's lease; the worker that does will finish the job."""


def job_start(*, kind: str, study=None, user=None, params: dict | None = None) -> Job:
    """Record a pending Job and send it to the workers once the surrounding transaction commits.

    Never fails because the broker is down: the job then stays pending and beat sends it later.
    """
    handler_for(kind)  # an unknown kind fails here, before anything is stored
    job = Job.objects.create(kind=kind, study=study, created_by=user, params=params or {})
    transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


# --- handing jobs to workers -------------------------------------------------------------------


def _broker_redis():
    """A Redis client on the broker's own database, or None for other brokers (eager mode included).

    The witness keys must live where the queue lives: whatever loses the queue
    (a restart without persistence, a flush, a failover to an empty replica)
    loses the witnesses with it, and that is how beat notices lost messages.
    """
    url = settings.CELERY_BROKER_URL
    if settings.CELERY_TASK_ALWAYS_EAGER or not url.startswith(("redis://", "rediss://")):
        return None
    client = getattr(_broker_redis, "client", None)
    if client is None:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        _broker_redis.client = client
    return client


def _message_ttl_s() -> int:
    # A message taken by a worker that died before claiming the job comes back after the
    # broker's visibility timeout; the witness lasts as long, then beat sends a new one.
    return int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600))


def job_enqueue(*, job_id: int) -> bool:
    """Send one `run_job` message for a pending job and record its id. False if the broker is down
    (the job stays pending and `jobs_tend`, run by beat, sends it once the broker is back)."""
    run_job = task_named(RUN_JOB)
    message_id = uuid.uuid4().hex
    marked = Job.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
        message_id=message_id, enqueued_at=timezone.now()
    )
    if not marked:
        return False  # claimed or finished meanwhile: no message needed
    try:
        run_job.apply_async(args=[job_id], task_id=message_id)
    except Exception:  # kombu raises several transport-specific errors; all mean "not sent"
        log.warning("could not enqueue job %s; it stays pending and beat will send it", job_id, exc_info=True)
        Job.objects.filter(pk=job_id, message_id=message_id).update(message_id="")
        return False
    client = _broker_redis()
    if client is not None:
        try:
            client.set(WITNESS_PREFIX + str(job_id), message_id, ex=_message_ttl_s())
        except Exception:  # no witness means beat sends one more message; the job still runs once
            log.warning("could not record the message of job %s", job_id, exc_info=True)
    return True


def _queued_message_ids(jobs: list[Job]) -> dict[int, str] | None:
    """The message id the broker holds a witness for, per job; None when that cannot be known."""
    client = _broker_redis()
    if client is None or not jobs:
        return None
    values = client.mget([WITNESS_PREFIX + str(job.pk) for job in jobs])
    return {job.pk: (value or b"").decode() for job, value in zip(jobs, values, strict=True)}


def _reap_stalled(now) -> tuple[int, int, int]:
    """Running jobs whose lease expired: back to pending ("worker lost") and sent again, or failed after
    too many claims. Returns (re-queued, failed, sent)."""
    requeued = failed = sent = 0
    stalled = Job.objects.filter(status=JobStatus.RUNNING).filter(
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    )
    for job in stalled.only("pk", "attempts", "lease_owner", "lease_expires_at", "kind"):
        # Conditional on the lease we looked at: a heartbeat that renewed it meanwhile wins.
        same = Job.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, lease_owner=job.lease_owner, lease_expires_at=job.lease_expires_at
        )
        if job.attempts >= settings.FAULTLINE_JOB_MAX_ATTEMPTS:
            error = (
                f"The worker running this job was lost {job.attempts} times (it stopped sending heartbeats); "
                "giving up. Check the worker logs for out-of-memory kills, then start the job again."
            )
            failed += same.update(
                status=JobStatus.FAILED, error=error, finished_at=now, lease_owner="", lease_expires_at=None
            )
            continue
        if same.update(
            status=JobStatus.PENDING, lease_owner="", lease_expires_at=None, message_id="", retry_reason=WORKER_LOST
        ):
            log.warning("job %s (%s): worker lost (no heartbeat), re-queued after %s claims", job.pk, job.kind,
                        job.attempts)  # fmt: skip
            requeued += 1
            sent += job_enqueue(job_id=job.pk)
    return requeued, failed, sent


def jobs_tend(*, older_than_s: float | None = None) -> dict[str, int]:
    """Beat's rounds: re-queue stalled jobs, and send pending jobs whose message is not queued.

    A pending job gets a new message only if it has none on record, or the
    broker has no witness of the recorded one (the broker lost it), and only
    once it is `older_than_s` old, so a job being started right now is not
    sent twice. While no worker consumes the queue, nothing is added to it.
    """
    older_than_s = settings.FAULTLINE_REQUEUE_AFTER_S if older_than_s is None else older_than_s
    now = timezone.now()
    requeued, failed, sent = _reap_stalled(now)
    cutoff = now - timedelta(seconds=older_than_s)
    pending = list(
        Job.objects.filter(status=JobStatus.PENDING)
        .filter(Q(enqueued_at__lt=cutoff) | Q(enqueued_at__isnull=True, created_at__lt=cutoff) | Q(message_id=""))
        .only("pk", "message_id", "enqueued_at", "created_at")
    )
    witnessed = _queued_message_ids([job for job in pending if job.message_id])
    for job in pending:
        if job.message_id:
            if witnessed is not None and witnessed.get(job.pk) == job.message_id:
                continue  # its message is still queued: the job waits for a worker
            if witnessed is None and job.enqueued_at and job.enqueued_at > now - timedelta(seconds=_message_ttl_s()):
                continue  # no way to ask the broker: trust a message until its visibility timeout
        elif (job.enqueued_at or job.created_at) > cutoff:
            continue
        sent += job_enqueue(job_id=job.pk)
    return {"requeued": requeued, "failed": failed, "sent": sent}


# --- running a job -----------------------------------------------------------------------------


def _owner_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Lease:
    """A claimed job's lease, renewed by a heartbeat until the handler returns.

    On PostgreSQL a daemon thread renews it on a connection of its own every
    quarter lease, so long steps that report no progress (training a model,
    waiting for bootstrap chunks) keep it too. SQLite allows one writer at a
    time, so there it is renewed from the progress callback instead.
    """

    def __init__(self, job: Job):
        self.job_id = job.pk
        self.owner = job.lease_owner
        self.seconds = settings.FAULTLINE_JOB_LEASE_S
        self.interval = max(0.5, self.seconds / 4)
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = time.monotonic()

    def renew(self) -> bool:
        now = timezone.now()
        renewed = Job.objects.filter(pk=self.job_id, lease_owner=self.owner, status=JobStatus.RUNNING).update(
            lease_expires_at=now + timedelta(seconds=self.seconds), heartbeat_at=now
        )
        self._last = time.monotonic()
        if not renewed:
            # Lost only if the row says so: a connection that cannot see the row yet (the claim's
            # transaction is still open, as in tests) proves nothing.
            row = Job.objects.filter(pk=self.job_id).values_list("lease_owner", "status").first()
            if row is not None and row != (self.owner, JobStatus.RUNNING):
                self.lost.set()
        return bool(renewed)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval) and not self.lost.is_set():
                try:
                    self.renew()
                except Exception:  # the database may be restarting; the next beat tries again
                    log.warning("job %s: heartbeat failed", self.job_id, exc_info=True)
                    connections.close_all()
        finally:
            connections.close_all()  # this thread's connections only

    def __enter__(self) -> Lease:
        if connection.vendor != "sqlite":
            self._thread = threading.Thread(target=self._beat, name=f"job-{self.job_id}-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def check(self) -> None:
        """Raise LeaseLost once another worker may have the job; renew here where no thread does."""
        if self._thread is None and time.monotonic() - self._last >= self.interval and not connection.in_atomic_block:
            self.renew()
        if self.lost.is_set():
            raise LeaseLost(f"job {self.job_id}: lease lost")


def job_checkpoint_save(*, job: Job, checkpoint: dict[str, Any], done: int | None = None,
                        total: int | None = None) -> None:  # fmt: skip
    """Record how far the job got, in the caller's transaction, only while this worker holds the lease.

    Call it inside the transaction that writes the work it describes: the work
    and the checkpoint then commit together or not at all, and a worker that
    lost its lease gets LeaseLost here and commits neither.
    """
    fields: dict[str, Any] = {"checkpoint": checkpoint}
    if done is not None:
        fields["done"] = done
    if total is not None:
        fields["total"] = total
    if not Job.objects.filter(pk=job.pk, lease_owner=job.lease_owner, status=JobStatus.RUNNING).update(**fields):
        raise LeaseLost(f"job {job.pk}: lease lost")
    job.checkpoint = checkpoint


def job_progress_writer(job: Job, *, lease: Lease | None = None, min_interval: float = 0.5) -> ProgressFn:
    """A progress callback that writes to the Job row at most every `min_interval` seconds.

    With a lease it raises LeaseLost at the first progress report after the lease was lost.
    """
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if lease is not None:
            lease.check()
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


def _expected(exc: BaseException) -> bool:
    """A refusal of the job's input (a bad file, a validation error), not a failure of the code: such
    exceptions are Django's ValidationError and PermissionDenied, and the input errors that say so
    with `expected_failure = True` (ImportFileError, CodebookError, lib.safejson.JSONError, ...)."""
    from django.core.exceptions import PermissionDenied, ValidationError

    return isinstance(exc, ValidationError | PermissionDenied) or getattr(type(exc), "expected_failure", False)


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


def job_claim(*, job_id: int) -> Job | None:
    """Take a pending job with one conditional UPDATE; None if it is not pending (another delivery has it)."""
    now = timezone.now()
    owner = _owner_token()
    claimed = Job.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
        status=JobStatus.RUNNING,
        lease_owner=owner,
        lease_expires_at=now + timedelta(seconds=settings.FAULTLINE_JOB_LEASE_S),
        heartbeat_at=now,
        started_at=now,
        attempts=F("attempts") + 1,
        message_id="",
        error="",
    )
    if not claimed:
        return None
    return Job.objects.select_related("study").get(pk=job_id)


def _finish(job: Job, **fields: Any) -> bool:
    """Write the end state if this worker still holds the lease."""
    fields.update(finished_at=timezone.now(), lease_owner="", lease_expires_at=None)
    return bool(Job.objects.filter(pk=job.pk, lease_owner=job.lease_owner, status=JobStatus.RUNNING).update(**fields))


def _defer(job: Job) -> None:
    """The handler handed the work to other tasks (a chord), which finish the job. They hold its lease
    now, for DEFERRED_LEASE_S at a time, renewed by `job_deferred_heartbeat` as their pieces finish."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk, lease_owner=job.lease_owner, status=JobStatus.RUNNING).update(
        lease_owner=f"deferred:{job.pk}", lease_expires_at=now + timedelta(seconds=DEFERRED_LEASE_S), heartbeat_at=now
    )


def job_deferred_heartbeat(*, job_id: int) -> None:
    """A piece of a deferred job finished: its tasks are alive, so renew the job's lease."""
    now = timezone.now()
    Job.objects.filter(pk=job_id, status=JobStatus.RUNNING, lease_owner=f"deferred:{job_id}").update(
        lease_expires_at=now + timedelta(seconds=DEFERRED_LEASE_S), heartbeat_at=now
    )


def _release(job: Job, reason: str) -> None:
    """Give a job back to pending after a transient failure; beat sends it again."""
    try:
        Job.objects.filter(pk=job.pk, lease_owner=job.lease_owner, status=JobStatus.RUNNING).update(
            status=JobStatus.PENDING, lease_owner="", lease_expires_at=None, message_id="", retry_reason=reason[:200]
        )
    except Exception:  # the database is still away: the lease expires and beat re-queues the job
        log.warning("job %s: could not release it; its lease will expire", job.pk, exc_info=True)


def job_run(*, job_id: int) -> Job | None:
    """Claim the job and run its handler, unless another delivery already claimed or finished it."""
    job = job_claim(job_id=job_id)
    if job is None:
        log.info("job %s is not pending; this delivery does nothing", job_id)
        return Job.objects.filter(pk=job_id).first()
    handler = handler_for(job.kind)
    with Lease(job) as lease:
        for receiver, response in job_started.send_robust(sender=Job, job=job):
            if isinstance(response, Exception):
                log.warning("job %s: job_started receiver %r failed", job.pk, receiver, exc_info=response)
        try:
            result = handler(job=job, progress=job_progress_writer(job, lease=lease))
        except LeaseLost:
            log.warning("job %s (%s): lease lost; the worker that took it over finishes it", job.pk, job.kind)
        except (OperationalError, InterfaceError) as exc:
            log.warning("job %s (%s): database unavailable, released for a retry", job.pk, job.kind, exc_info=True)
            connections.close_all()
            _release(job, f"database unavailable: {str(exc).splitlines()[0][:150]}")
        except Exception as exc:  # the job records any failure; the worker stays up
            if _expected(exc):  # bad input, refused as designed: one line, the job page has the message
                log.warning("job %s (%s) refused its input: %s", job.pk, job.kind, str(exc).splitlines()[0][:300])
            else:
                log.exception("job %s (%s) failed", job.pk, job.kind)
            _finish(job, status=JobStatus.FAILED, error=job_error_text(job, exc))
        else:
            if result is DEFERRED:
                _defer(job)
            elif not _finish(job, status=JobStatus.SUCCESS, result=result, done=F("total"), retry_reason=""):
                log.warning("job %s (%s) finished after losing its lease; its result is not recorded", job.pk,
                            job.kind)  # fmt: skip
    job.refresh_from_db()
    return job
