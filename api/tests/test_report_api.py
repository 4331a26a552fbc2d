"""GET/POST /api/v1/studies/{slug}/report/: the report bundle as a zip, inline for small studies, by a job for
large ones; reading it needs a token and a membership that shows the analysis."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.contrib.auth import get_user_model

from annotate.models import Job, JobStatus

URL = "/api/v1/studies/demo/report/"


@pytest.fixture
def demo(codebook, settings, tmp_path):
    from annotate.ops.demo import demo_build

    settings.MEDIA_ROOT = tmp_path
    return demo_build().study


def _user(name):
    return get_user_model().objects.get(username=name)


def _names(response) -> set[str]:
    return set(zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist())


def test_it_needs_a_token_and_a_membership_that_shows_the_analysis(demo, api, as_user, charlie):
    assert api.get(URL).status_code in (401, 403)
    assert as_user(charlie).get(URL).status_code == 404  # the study's existence is not revealed
    blind_coder = as_user(_user("demo-coder1"))
    assert blind_coder.get(URL).status_code == 403
    assert blind_coder.post(URL, {}).status_code == 403
    bad = as_user(_user("demo-owner")).get(URL, {"bootstrap": "5", "contrast": "nope"})
    assert bad.status_code == 400 and set(bad.json()) >= {"bootstrap", "contrast"}
    assert not Job.objects.filter(kind="report").exists()


def test_a_small_study_gets_its_zip_inline(demo, as_user):
    response = as_user(_user("demo-owner")).get(URL, {"bootstrap": "300"})
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert 'filename="demo-report.zip"' in response["Content-Disposition"]
    names = _names(response)
    assert {"demo-report/report.html", "demo-report/report.pdf", "demo-report/tables.tex",
            "demo-report/provenance.json", "demo-report/export/demo.jsonl"} <= names  # fmt: skip
    assert any(n.endswith(".svg") for n in names)
    assert not Job.objects.filter(kind="report").exists()  # a GET starts nothing


def test_a_large_study_is_built_by_a_job_and_then_served(demo, as_user, settings, django_capture_on_commit_callbacks,
                                                        eager_jobs):  # fmt: skip
    settings.FAULTLINE_REPORT_SYNC_EPISODES = 10
    owner = as_user(_user("demo-owner"))
    refused = owner.get(URL, {"bootstrap": "300"})
    assert refused.status_code == 409 and "POST /api/v1/studies/demo/report/" in refused.json()["detail"]
    assert not Job.objects.filter(kind="report").exists()
    with django_capture_on_commit_callbacks(execute=True):
        started = owner.post(URL, {"bootstrap": "300"}, format="json")
    assert started.status_code == 202
    job = Job.objects.get(pk=started.json()["id"])
    assert job.kind == "report" and job.status == JobStatus.SUCCESS, job.error
    assert job.result["file"] == f"demo-{job.pk}.zip" and len(job.result["labels_sha256"]) == 64
    got = owner.get(f"/api/v1/jobs/{job.pk}/file/")
    assert got.status_code == 200 and "demo-report/report.pdf" in _names(got)
    # The same parameters on the same labels: GET now serves the job's zip; other parameters still need a job.
    assert owner.get(URL, {"bootstrap": "300"}).status_code == 200
    assert owner.get(URL, {"bootstrap": "300", "seed": "7"}).status_code == 409
    assert Job.objects.filter(kind="report").count() == 1
    assert as_user(_user("demo-coder1")).get(f"/api/v1/jobs/{job.pk}/file/").status_code in (403, 404)
