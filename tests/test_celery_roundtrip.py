"""A real Celery round trip: a worker subprocess against Redis runs a job and writes to the database."""

import time
import uuid

import pytest

from annotate.jobs.runner import job_start
from annotate.models import Episode, Job, JobStatus


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_a_job_and_its_result_lands_in_the_database(celery_worker, study, make_episode):
    ep = make_episode(study)
    Episode.objects.filter(pk=ep.pk).update(n_codings=7)  # a stale counter for the job to repair

    queue = f"roundtrip-{uuid.uuid4().hex[:8]}"
    celery_worker(queue)
    from annotate.jobs.tasks import run_job

    job = Job.objects.create(kind="recount", study=study)
    run_job.apply_async(args=[job.pk], queue=queue)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.finished:
            break
        time.sleep(0.2)
    assert job.status == JobStatus.SUCCESS, job.error
    assert job.result == {"fixed": 1}
    ep.refresh_from_db()
    assert ep.n_codings == 0


def test_without_a_broker_jobs_run_eagerly(study, make_episode, django_capture_on_commit_callbacks, monkeypatch):
    from config.celery import app

    # What settings do when CELERY_BROKER_URL is unset, forced here so it runs under CI's broker too.
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    ep = make_episode(study)
    Episode.objects.filter(pk=ep.pk).update(n_codings=3)
    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind="recount", study=study)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESS
    assert job.result == {"fixed": 1}


def test_a_failing_job_records_its_error(study, monkeypatch):
    from annotate.jobs import registry
    from annotate.jobs import runner as jobs

    monkeypatch.setitem(registry.HANDLERS, "boom", int)  # int(job=..., progress=...) raises TypeError
    job = Job.objects.create(kind="boom", study=study)
    jobs.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error
