"""The trace entry points besides the command: the study page upload (a job with progress), the traces API
(a file as a job, JSON with artifacts at once, the steps window), permissions, and the first screen's
query count, which must not grow with the trace."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import Document, Episode, Job, TraceStep
from annotate.tests.factories.trace_fixtures import otlp_trace
from annotate.traces.services import trace_import_value

WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


@pytest.fixture
def eager_jobs(monkeypatch):
    """Run jobs in-process, as without a broker, even when CI configures Redis."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def api_as(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_study_page_upload_runs_a_trace_import_job(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    assert 'id="trace-import-panel"' in client.get(reverse("study_overview", args=["alpha"])).content.decode()
    upload = SimpleUploadedFile("log.json", (WHO / "Hand-Crafted" / "6.json").read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("trace_upload", args=["alpha"]), {"file": upload, "format": "whowhen"},
                               HTTP_HX_REQUEST="true")  # fmt: skip
    job = Job.objects.get(kind="import_traces")
    assert job.status == "success", job.error
    assert job.result["created"] == 1 and job.result["format"] == "whowhen"
    assert f'id="job-{job.pk}"' in response.content.decode()
    assert TraceStep.objects.filter(document__study=study).count() == 8
    assert not any((tmp_path / "imports").iterdir())


def test_a_bad_trace_upload_fails_the_job_naming_the_file(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    upload = SimpleUploadedFile("spans.json", json.dumps({"resourceSpans": "nope"}).encode())
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("trace_upload", args=["alpha"]), {"file": upload, "format": "otlp"})
    job = Job.objects.get(kind="import_traces")
    assert job.status == "failed" and job.error.startswith("spans.json:") and "Nothing was imported" in job.error
    response = client.post(reverse("trace_upload", args=["alpha"]), {"file": upload, "format": "csv"})
    assert response.status_code == 400 and "Choose a format" in response.content.decode()
    assert not Document.objects.exists()


def test_the_api_imports_json_with_artifacts_and_a_file_as_a_job(
    study, alice, bob, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    url = "/api/v1/studies/alpha/traces/"
    payload = {"format": "otlp", "data": otlp_trace(),
               "artifacts": [{"kind": "diff", "name": "app.py", "content": "+x", "span_id": "t1"}]}  # fmt: skip
    assert api_as(bob).post(url, payload, format="json").status_code == 403  # coders do not import
    response = api_as(alice).post(url, payload, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["created"] == 1 and body["traces"][0]["episode"] == Episode.objects.get().pk
    doc_id = body["traces"][0]["document"]
    steps = api_as(bob).get(f"/api/v1/studies/alpha/traces/{doc_id}/steps/?start=3&limit=2").json()
    assert steps["total"] == 7 and steps["next_start"] == 5
    assert [(s["index"], s["name"], s["evidence"]) for s in steps["steps"]] == [
        (3, "deploy", "requested"),
        (4, "run_tests", "effect"),
    ]
    assert steps["steps"][1]["artifacts"][0]["name"] == "app.py"
    bad = {"format": "otlp", "data": otlp_trace(), "artifacts": [{"kind": "diff", "name": "x", "content": "y",
                                                                  "step": 99}]}  # fmt: skip
    response = api_as(alice).post(url, bad, format="json")
    assert response.status_code == 400 and "artifacts[0].step" in response.json()
    upload = SimpleUploadedFile("log.json", (WHO / "Hand-Crafted" / "6.json").read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(alice).post(url, {"file": upload, "format": "whowhen"}, format="multipart")
    assert response.status_code == 202 and Job.objects.get(pk=response.json()["id"]).status == "success"


def test_the_first_screen_costs_the_same_queries_for_a_short_and_a_long_trace(client, study, bob):
    def trace(n_tools):
        data = otlp_trace()
        spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
        template = spans[3]
        for i in range(n_tools):
            spans.append({**template, "spanId": f"x{i}", "attributes": template["attributes"][:2]})
        for s in spans:
            s["traceId"] = f"trace-{n_tools}"
        return data

    _, (short,) = trace_import_value(study=study, data=trace(0), fmt="otlp")
    _, (long,) = trace_import_value(study=study, data=trace(600), fmt="otlp")
    client.force_login(bob)
    counts = []
    for doc in (short, long):
        url = reverse("coding_page", args=["alpha", doc.episodes.get().pk])
        client.get(url)  # takes the lease
        with CaptureQueriesContext(connection) as ctx:
            html = client.get(url).content.decode()
        counts.append(len(ctx.captured_queries))
        assert 'id="trace"' in html
    assert counts[0] == counts[1]
    assert html.count('class="trace-step ') == 40 and "Load the steps from #40 on" in html
