"""A worker killed mid-import leaves nothing half-imported, and re-running the job completes it."""

import json
import os
import signal
import uuid
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings

from annotate.models import Document, Episode, Job, JobStatus

from .conftest import app_env, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

N = 20_000


def big_issue_file() -> Path:
    directory = Path(settings.MEDIA_ROOT) / "imports"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.json"
    issues = [
        {
            "url": f"https://api.github.com/repos/org{i % 300}/agent/issues/{i}",
            "repository_url": f"https://api.github.com/repos/org{i % 300}/agent",
            "html_url": f"https://github.com/org{i % 300}/agent/issues/{i}",
            "number": i,
            "title": f"Tool call {i} times out",
            "state": "open",
            "body": "The search tool timed out after 30 s and the agent gave up. " * 4,
            "labels": [{"name": "bug"}],
            "user": {"login": "someone"},
            "created_at": "2025-01-01T00:00:00Z",
            "updated_at": "2025-01-02T00:00:00Z",
        }
        for i in range(N)
    ]
    path.write_text(json.dumps(issues))
    return path


def test_a_killed_import_writes_nothing_and_a_rerun_completes_it(
    require_postgres, private_redis, processes, study, alice, monkeypatch
):
    path = big_issue_file()
    job = Job.objects.create(
        kind="import", study=study, created_by=alice,
        params={"path": f"imports/{path.name}", "filename": "big.json", "include_prs": False},
    )  # fmt: skip
    env = app_env(CELERY_BROKER_URL=private_redis.url, FAULTLINE_CELERY_QUEUE="kill")
    # Celery lets CELERY_BROKER_URL in the environment override an app's own broker argument.
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    sender = Celery(broker=private_redis.url, set_as_current=False)
    try:
        worker = processes._spawn(
            "worker",
            [os.sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "kill", "--pool", "solo",
             "--without-gossip", "--without-mingle", "-l", "INFO"],
            env,
        )  # fmt: skip
        sender.send_task("annotate.tasks.run_job", args=[job.pk], queue="kill")

        def importing():
            job.refresh_from_db()
            return job.status == JobStatus.RUNNING and job.done > 0

        wait_for(importing, 90, "the import to be under way", interval=0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)

        # All or nothing: the import's transaction died with the worker.
        assert Document.objects.filter(study=study).count() == 0
        assert Episode.objects.filter(study=study).count() == 0
        job.refresh_from_db()
        assert job.status == JobStatus.RUNNING  # the job row says where it stopped; its file is still there
        assert path.exists()

        processes.worker(env, "kill", name="worker2")
        sender.send_task("annotate.tasks.run_job", args=[job.pk], queue="kill")

        def finished():
            job.refresh_from_db()
            return job.finished

        wait_for(finished, 120, "the re-run to finish", interval=0.2)
        assert job.status == JobStatus.SUCCESS, job.error
        assert job.result["created"] == N
        assert Document.objects.filter(study=study).count() == N
        assert Episode.objects.filter(study=study).count() == N
        assert not path.exists()
    finally:
        sender.close()
        path.unlink(missing_ok=True)
