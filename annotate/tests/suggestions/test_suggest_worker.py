"""A suggestion batch run by a real Celery worker (PostgreSQL + Redis) against the local OpenAI-compatible server."""

from __future__ import annotations

import time
import uuid

import pytest

from annotate.models import Job, JobStatus, Suggestion
from annotate.tests.factories.llm_server import FakeLLMServer


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_an_llm_suggestion_batch(celery_worker, study, make_episode, bob):
    episodes = [make_episode(study, body=f"The agent got 429 Too Many Requests, run {i}.") for i in range(3)]
    server = FakeLLMServer().start()
    server.script = ["429"]  # the worker retries it
    queue = f"suggest-{uuid.uuid4().hex[:8]}"
    celery_worker(
        queue,
        env={
            "OPENAI_API_KEY": "sk-test-dummy",
            "OPENAI_BASE_URL": server.base_url,
            "FAULTLINE_LLM_MODEL": "fake-model-1",
            "FAULTLINE_LLM_BACKOFF_BASE_S": "0.01",
        },
    )
    try:
        from annotate.jobs.tasks import run_job

        job = Job.objects.create(kind="suggest", study=study, created_by=bob, params={"backend": "openai"})
        run_job.apply_async(args=[job.pk], queue=queue)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.finished:
                break
            time.sleep(0.2)
        assert job.status == JobStatus.SUCCESS, job.error
        assert job.result["suggested"] == 3 and job.done == job.total == 3
        rows = Suggestion.objects.filter(episode__in=episodes)
        assert rows.count() == 3 and {s.failure_type.code for s in rows} == {"EXT-01"}
        assert {s.model for s in rows} == {"fake-model-1"} and all(s.job_id == job.pk for s in rows)
        assert len(server.requests) == 4  # three episodes, one 429 retried
    finally:
        server.stop()
