"""An uploaded import through a real Celery worker (Redis broker, PostgreSQL), as in production."""

import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.imports.uploads import import_upload_start
from annotate.models import Document, Episode, JobStatus

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_imports_an_upload_and_deletes_it(celery_worker, study, alice, monkeypatch):

    from config.celery import app

    queue = f"imports-{uuid.uuid4().hex[:8]}"
    monkeypatch.setitem(app.conf, "task_default_queue", queue)
    celery_worker(queue)
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
