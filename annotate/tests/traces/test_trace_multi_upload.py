"""Several trace files in one upload: each becomes its own job with its own progress, and one unsupported file
refuses the lot before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.models import Document, Job

WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_jobs(monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def log(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(f"hc-{name}", (WHO / "Hand-Crafted" / name).read_bytes())


def test_it_imports_each_chosen_file_as_its_own_job(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    page = client.get(reverse("study_overview", args=["alpha"])).content.decode()
    assert 'name="file" accept=".json,.jsonl,.ndjson" multiple' in page and "data-max-bytes=" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("trace_upload", args=["alpha"]),
            {"file": [log("6.json"), log("3.json"), log("10.json")], "format": "whowhen"},
            HTTP_HX_REQUEST="true",
        )
    jobs = list(Job.objects.filter(kind="import_traces").order_by("pk"))
    assert [j.status for j in jobs] == ["success"] * 3
    assert sorted(j.params["filename"] for j in jobs) == ["hc-10.json", "hc-3.json", "hc-6.json"]
    html = response.content.decode()
    assert all(f'id="job-{j.pk}"' in html for j in jobs)
    assert Document.objects.filter(study=study, kind="trace").count() == 3
    polled = client.get(reverse("job_status", args=[jobs[0].pk]), HTTP_HX_REQUEST="true")
    assert polled["HX-Trigger"] == "faultline:imported"  # finished: the study page refreshes its counts
    assert 'id="study-counts"' in page and "faultline:imported from:body" in page


def test_one_unsupported_file_refuses_the_whole_upload_naming_it(client, study, alice, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    bad = SimpleUploadedFile("notes.txt", b"hello")
    response = client.post(reverse("trace_upload", args=["alpha"]), {"file": [log("6.json"), bad], "format": "whowhen"})
    assert response.status_code == 400 and "&#x27;notes.txt&#x27;" in response.content.decode()
    assert not Job.objects.exists() and not (tmp_path / "imports").exists()
