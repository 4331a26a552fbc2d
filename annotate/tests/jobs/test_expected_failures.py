"""A job refused for its input logs one line; a job that fails on a bug keeps its traceback in the log."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.models import Job


@pytest.fixture
def eager_jobs(monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def _upload(client, alice, content: bytes, django_capture_on_commit_callbacks):
    client.force_login(alice)
    upload = SimpleUploadedFile("spans.json", content)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("trace_upload", args=["alpha"]), {"file": upload, "format": "otlp"})
    return Job.objects.get(kind="import_traces")


def test_a_bad_file_fails_its_job_with_one_log_line(
    client, study, alice, settings, tmp_path, caplog, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    with caplog.at_level(logging.INFO, logger="annotate.jobs.runner"):
        job = _upload(client, alice, json.dumps({"resourceSpans": "nope"}).encode(), django_capture_on_commit_callbacks)
    assert job.status == "failed" and job.error.startswith("spans.json:")
    lines = [r for r in caplog.records if r.name == "annotate.jobs.runner" and str(job.pk) in r.getMessage()]
    assert lines and all(r.exc_info is None for r in lines)
    assert any(r.levelno == logging.WARNING and "spans.json" in r.getMessage() for r in lines)
    assert "Traceback" not in caplog.text


def test_a_bug_keeps_its_traceback(
    client, study, alice, settings, tmp_path, caplog, monkeypatch, django_capture_on_commit_callbacks, eager_jobs
):
    from annotate.traces import parsers

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(parsers, "parse_trace_value", broken)
    settings.MEDIA_ROOT = tmp_path
    with caplog.at_level(logging.INFO, logger="annotate.jobs.runner"):
        job = _upload(client, alice, json.dumps({"resourceSpans": []}).encode(), django_capture_on_commit_callbacks)
    assert job.status == "failed"
    assert any(r.exc_info and r.levelno == logging.ERROR for r in caplog.records if r.name == "annotate.jobs.runner")
