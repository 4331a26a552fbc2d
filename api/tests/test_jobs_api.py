"""Starting jobs over the API (import, suggestions, analysis) and reading them back."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Job


def test_an_owner_uploads_a_file_and_gets_its_import_job(as_user, alice, study):
    upload = SimpleUploadedFile("issues.json", b"[]", content_type="application/json")
    response = as_user(alice).post("/api/v1/studies/alpha/import/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.study, job.created_by) == ("import", study, alice)
    assert as_user(alice).get(f"/api/v1/jobs/{job.pk}/").json()["kind"] == "import"


def test_a_bad_upload_is_a_field_error(as_user, alice, study):
    upload = SimpleUploadedFile("notes.docx", b"PK...", content_type="application/octet-stream")
    response = as_user(alice).post("/api/v1/studies/alpha/import/", {"file": upload}, format="multipart")
    assert response.status_code == 400 and "file" in response.json()
    assert as_user(alice).post("/api/v1/studies/alpha/import/", {}, format="multipart").status_code == 400
    assert not Job.objects.exists()


def test_coders_cannot_import(as_user, bob, study):
    upload = SimpleUploadedFile("issues.json", b"[]", content_type="application/json")
    assert as_user(bob).post("/api/v1/studies/alpha/import/", {"file": upload}, format="multipart").status_code == 403


def test_a_coder_starts_a_suggestion_batch_for_chosen_episodes(as_user, bob, study, make_episode, other_study):
    ep = make_episode(study)
    response = as_user(bob).post("/api/v1/studies/alpha/suggest/", {"episode_ids": [ep.pk], "limit": 5}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.kind == "suggest" and job.params["episode_ids"] == [ep.pk] and job.params["limit"] == 5
    theirs = make_episode(other_study)
    bad = as_user(bob).post("/api/v1/studies/alpha/suggest/", {"episode_ids": [theirs.pk]}, format="json")
    assert bad.status_code == 400 and "episode_ids" in bad.json()
    bad = as_user(bob).post("/api/v1/studies/alpha/suggest/", {"backend": "openai"}, format="json")
    assert bad.status_code == 400 and "backend" in bad.json()  # no OPENAI_API_KEY in the tests


def test_an_analysis_job_is_started_with_checked_parameters(as_user, bob, study):
    study.blind = False  # in a blind study only owners may (tests/security/test_blinding.py)
    study.save()
    response = as_user(bob).post("/api/v1/studies/alpha/analysis/", {"bootstrap": 200, "seed": 7}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.kind == "bootstrap" and job.params == {"bootstrap": 200, "seed": 7}
    bad = as_user(bob).post("/api/v1/studies/alpha/analysis/", {"bootstrap": 5, "cell": "nowhere"}, format="json")
    assert bad.status_code == 400 and {"bootstrap", "cell"} <= set(bad.json())
