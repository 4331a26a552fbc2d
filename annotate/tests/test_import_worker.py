"""An uploaded import through a real Celery worker (Redis broker, PostgreSQL), as in production."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Document, Episode, JobStatus
from annotate.services.imports import import_upload_start

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_imports_an_upload_and_deletes_it(require_postgres, require_redis, study, alice, monkeypatch):
    from django.db import connection

    from config.celery import app

    queue = f"imports-{uuid.uuid4().hex[:8]}"
    monkeypatch.setitem(app.conf, "task_default_queue", queue)
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "FAULTLINE_CELERY_QUEUE": queue,
        "FAULTLINE_DEV": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--pool", "solo",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"],
        cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        upload = SimpleUploadedFile("literature.bib", (SAMPLES / "literature.bib").read_bytes())
        job = import_upload_start(study=study, user=alice, uploaded_file=upload)
        # The worker may already have finished (and deleted it): only check where it was put.
        stored = Path(settings.MEDIA_ROOT) / job.params["path"]
        assert stored.parent == Path(settings.MEDIA_ROOT) / "imports" and stored.suffix == ".bib"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.finished:
                break
            time.sleep(0.2)
        assert job.status == JobStatus.SUCCESS, job.error
        assert (job.result["created"], job.done, job.total) == (24, 24, 24)
        assert Document.objects.filter(study=study).count() == Episode.objects.filter(study=study).count() == 24
        assert not stored.exists()
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
