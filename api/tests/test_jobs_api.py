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
    assert "refresh" not in job.params  # by default an older example pool counts as suggested
    response = as_user(bob).post("/api/v1/studies/alpha/suggest/", {"refresh": True}, format="json")
    assert response.status_code == 202 and Job.objects.get(pk=response.json()["id"]).params["refresh"] is True
    bad = as_user(bob).post("/api/v1/studies/alpha/suggest/", {"refresh": "sometimes"}, format="json")
    assert bad.status_code == 400 and "refresh" in bad.json()
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
    key = job.params.pop("result_key")  # the stored result it computes (annotate.analysis.results)
    assert job.kind == "bootstrap" and job.params == {"bootstrap": 200, "seed": 7}
    assert '"bootstrap":200' in key and '"seed":7' in key
    bad = as_user(bob).post("/api/v1/studies/alpha/analysis/", {"bootstrap": 5, "cell": "nowhere"}, format="json")
    assert bad.status_code == 400 and {"bootstrap", "cell"} <= set(bad.json())


def test_an_upload_spooled_to_disk_is_moved_into_place_whole(as_user, alice, study, settings, tmp_path, monkeypatch):
    """Past FILE_UPLOAD_MAX_MEMORY_SIZE Django spools the upload to a temporary file: it is moved, not copied,
    so no temporary copy is left behind, and the job reads every byte of it."""
    import json
    import tempfile
    from pathlib import Path

    from django.core.files.uploadedfile import TemporaryUploadedFile

    from annotate.imports import uploads as imports

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "spool")
    Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir()
    stored: list[tuple[Path, bytes]] = []
    moves: list[tuple[str, str]] = []
    real_store, real_move = imports.upload_store, imports.file_move_safe

    def store(uploaded_file, **kwargs):
        assert isinstance(uploaded_file, TemporaryUploadedFile)
        path = real_store(uploaded_file, **kwargs)
        stored.append((path, path.read_bytes()))
        return path

    monkeypatch.setattr(imports, "upload_store", store)
    monkeypatch.setattr(imports, "file_move_safe", lambda a, b: (moves.append((a, b)), real_move(a, b))[1])
    monkeypatch.setattr(tempfile, "tempdir", settings.FILE_UPLOAD_TEMP_DIR)
    repo = "https://api.github.com/repos/acme/agent"
    issues = [{"html_url": f"https://github.com/acme/agent/issues/{i}", "number": i, "title": f"Issue {i}",
               "body": "x" * 200, "repository_url": repo} for i in range(40)]  # fmt: skip
    content = json.dumps(issues).encode()
    assert len(content) > 4 * settings.FILE_UPLOAD_MAX_MEMORY_SIZE
    upload = SimpleUploadedFile("issues.json", content, content_type="application/json")
    response = as_user(alice).post("/api/v1/studies/alpha/import/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    ((path, saved),) = stored
    assert saved == content and len(moves) == 1 and moves[0][1] == str(path)
    assert path.stat().st_mode & 0o777 == settings.FILE_UPLOAD_PERMISSIONS == 0o644  # a worker of another user reads it
    assert not any(Path(settings.FILE_UPLOAD_TEMP_DIR).iterdir())  # nothing left in the spool directory
    job = Job.objects.get(pk=response.json()["id"])
    assert job.params["path"] == f"imports/{path.name}"


def test_an_upload_is_read_a_megabyte_at_a_time(as_user, alice, study, settings, tmp_path, monkeypatch):
    """config.uploads: each read of the body takes 1 MB (gunicorn copies its whole read-ahead buffer on every
    read, so 64 KB reads cost a third of a large upload's web CPU), and the stored file is still byte for byte."""
    from pathlib import Path

    from config.uploads import TemporaryUpload

    settings.MEDIA_ROOT = str(tmp_path / "media")
    chunks: list[int] = []
    real = TemporaryUpload.receive_data_chunk

    def receive(self, raw_data, start):
        chunks.append(len(raw_data))
        return real(self, raw_data, start)

    monkeypatch.setattr(TemporaryUpload, "receive_data_chunk", receive)
    line = b'{"html_url": "https://github.com/acme/agent/issues/%d", "number": %d, "title": "t", "body": "%s"}'
    content = b"[" + b",\n".join(line % (i, i, b"x" * 2000) for i in range(3000)) + b"]"
    assert len(content) > settings.FILE_UPLOAD_MAX_MEMORY_SIZE  # the temporary-file handler takes it
    upload = SimpleUploadedFile("issues.json", content, content_type="application/json")
    response = as_user(alice).post("/api/v1/studies/alpha/import/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    assert max(chunks) == 1 << 20 and sum(chunks) == len(content)
    job = Job.objects.get(pk=response.json()["id"])
    assert (Path(settings.MEDIA_ROOT) / job.params["path"]).read_bytes() == content
