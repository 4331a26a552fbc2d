"""Long work as rows: a Job's kind, state, lease and progress (annotate.jobs runs them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotate.models.studies import Study


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCESS = "success", "Succeeded"
    FAILED = "failed", "Failed"


class Job(models.Model):
    """Long work run by Celery; pages poll its progress."""

    study = models.ForeignKey(
        Study, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs", db_index=False
    )
    kind = models.CharField(max_length=30)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.PENDING)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    celery_task_id = models.CharField(max_length=100, blank=True)
    # Claims so far: each worker that takes the job counts one (annotate.jobs).
    attempts = models.PositiveIntegerField(default=0)
    # The lease: which worker runs the job, and until when unless its heartbeat renews it.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The id of the one run_job message sent for the job while it is pending ("" once a worker claimed it).
    message_id = models.CharField(max_length=64, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # How far the handler got, written in the same transaction as the work it describes.
    checkpoint = models.JSONField(default=dict, blank=True)
    # Why the job went back to pending (e.g. "worker lost"); shown while it is retried.
    retry_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["study", "kind", "status"]),
            models.Index(fields=["status", "lease_expires_at"], name="job_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else (100 if self.status == JobStatus.SUCCESS else 0)

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.SUCCESS, JobStatus.FAILED)

    @property
    def stalled(self) -> bool:
        """Running, but its worker stopped renewing the lease: beat will re-queue it."""
        return self.status == JobStatus.RUNNING and (
            self.lease_expires_at is None or self.lease_expires_at < timezone.now()
        )

    @property
    def retried(self) -> bool:
        return self.attempts > 1 or (self.status == JobStatus.PENDING and bool(self.retry_reason))

    @property
    def max_attempts(self) -> int:
        return settings.FAULTLINE_JOB_MAX_ATTEMPTS

    @property
    def state(self) -> str:
        """What the Jobs list and the job page call it: queued, running, stalled, retrying or the final status."""
        if self.status == JobStatus.PENDING:
            return "retrying" if self.retry_reason else "queued"
        if self.status == JobStatus.RUNNING:
            return "stalled" if self.stalled else "running"
        return self.status
