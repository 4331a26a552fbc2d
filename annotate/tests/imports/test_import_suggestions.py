"""Uploaded documents get suggestions as incidents do, unless the study turns it off; inline imports are announced."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

ISSUES = json.dumps(
    [
        {
            "number": n,
            "title": f"Agent loops {n}",
            "body": "The agent called search forty times and never stopped.",
            "state": "open",
            "labels": [],
            "html_url": f"https://github.com/acme/agent/issues/{n}",
        }
        for n in (1, 2)
    ]
).encode()


def _upload(client, capture):
    with capture(execute=True):
        return client.post("/studies/alpha/import/", {"file": SimpleUploadedFile("issues.json", ISSUES)})


@pytest.mark.usefixtures("eager_jobs")
def test_an_upload_queues_suggestions_for_the_new_episodes(client, alice, study, django_capture_on_commit_callbacks):
    from annotate.models import Job, Suggestion

    client.force_login(alice)
    _upload(client, django_capture_on_commit_callbacks)
    job = Job.objects.get(kind="import")
    assert job.status == "success" and job.result["created"] == 2
    suggest = Job.objects.get(kind="suggest", pk=job.result["suggestion_job"])
    assert suggest.status == "success"
    assert Suggestion.objects.filter(episode__study=study).count() == 2
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "2</strong> created" in page and f"job #{suggest.pk}" in page


@pytest.mark.usefixtures("eager_jobs")
def test_a_study_can_turn_import_suggestions_off(client, alice, study, django_capture_on_commit_callbacks):
    from annotate.models import Job, Suggestion

    study.suggest_on_import = False
    study.save()
    client.force_login(alice)
    _upload(client, django_capture_on_commit_callbacks)
    assert not Job.objects.filter(kind="suggest").exists()
    assert not Suggestion.objects.exists()


def test_the_setting_is_on_the_coding_settings_page(client, alice, study):
    client.force_login(alice)
    data = {"coders_per_episode": 2, "queue_order": "random", "queue_splits": ["primary"], "blind": "on"}
    client.post("/studies/alpha/settings/coding/", data)
    study.refresh_from_db()
    assert study.suggest_on_import is False
    client.post("/studies/alpha/settings/coding/", {**data, "suggest_on_import": "on"})
    study.refresh_from_db()
    assert study.suggest_on_import is True


@pytest.mark.usefixtures("eager_jobs")
def test_the_import_panel_says_the_import_runs_inline_without_a_broker(client, alice, study, settings):
    client.force_login(alice)
    assert "runs inside this request" in client.get("/studies/alpha/").content.decode()
    settings.CELERY_TASK_ALWAYS_EAGER = False
    assert "runs inside this request" not in client.get("/studies/alpha/").content.decode()
