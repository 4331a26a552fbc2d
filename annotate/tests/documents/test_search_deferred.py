"""Search vectors off the import's critical path (issue 34): an import writes its documents without them, the
search_index job fills them afterwards, and search then answers exactly as for documents written one by one.

PostgreSQL only (CI runs it): SQLite's FTS5 triggers are never deferred, which the last test pins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from annotate.documents.search import document_search, search_pending
from annotate.documents.services import SEARCH_INDEX_JOB, search_index_queue, search_vectors_fill
from annotate.imports.parsed import Record
from annotate.imports.parsers import iter_file
from annotate.imports.services import import_file
from annotate.jobs.runner import job_run
from annotate.models import Document, Job

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples" / "github_issues.json"
# Words, phrases, exclusions, a title word and a word only deep in some bodies.
QUERIES = ["timeout", "rate limit", '"tool call"', "tool -json", "retry", "traceback", "context", "sandbox"]


def found(study, text: str) -> list[tuple[str, float]]:
    docs = document_search(Document.objects.filter(study=study), text)
    return [(d.external_id, round(d.search_rank, 6)) for d in docs]


def vectors(study) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT external_id, search::text FROM annotate_document WHERE study_id = %s", [study.pk])
        return dict(cursor.fetchall())


@pytest.fixture
def imported(require_postgres, study, other_study):
    """The sample issues imported into `study` (vectors deferred), and written one by one into `other_study`
    through the ORM (vectors by the trigger): the reference the follow-up must reach."""
    result = import_file(study=study, path=SAMPLES)
    for record in iter_file(SAMPLES):
        if isinstance(record, Record):
            Document.objects.create(study=other_study, kind=record.kind, external_id=record.external_id,
                                    cluster=record.cluster, title=record.title, body=record.body)  # fmt: skip
    return result


def test_an_import_is_codable_at_once_and_searchable_once_the_follow_up_ran(imported, study, other_study):
    assert imported.created == 58
    assert search_pending(study.pk) == 58 and search_pending(other_study.pk) == 0
    assert set(vectors(study).values()) == {None}
    reference = {q: found(other_study, q) for q in QUERIES}
    assert all(reference.values()), reference  # every query finds something in the reference
    assert all(found(study, q) == [] for q in QUERIES)  # not yet indexed: not found

    job = Job.objects.get(study=study, kind=SEARCH_INDEX_JOB, status="pending")
    assert not Job.objects.filter(study=other_study, kind=SEARCH_INDEX_JOB).exists()
    job = job_run(job_id=job.pk)
    assert job.status == "success" and job.result == {"indexed": 58}

    assert search_pending(study.pk) == 0
    assert vectors(study) == vectors(other_study)  # the same vectors, so the same matches and ranks
    assert {q: found(study, q) for q in QUERIES} == reference


def test_a_changed_document_is_searched_by_its_new_text_after_the_follow_up(imported, study, tmp_path):
    search_vectors_fill(study_id=study.pk)
    item = json.loads(SAMPLES.read_text(encoding="utf-8"))[0]
    doc = Document.objects.get(study=study, url=item["html_url"])
    assert [ext for ext, _ in found(study, "zeppelin")] == []
    item["body"] = "Completely different: the zeppelin mooring failed."
    changed = tmp_path / "one.jsonl"
    changed.write_text(json.dumps(item) + "\n", encoding="utf-8")
    assert import_file(study=study, path=changed).updated == 1
    assert search_pending(study.pk) == 1  # its old vector is gone with its old text
    assert found(study, "zeppelin") == []
    assert search_vectors_fill(study_id=study.pk) == 1
    assert [ext for ext, _ in found(study, "zeppelin")] == [doc.external_id]


def test_only_the_import_is_deferred_not_later_writes_in_its_transaction(imported, study):
    # The import ran in this test's transaction; a document written after it still gets its vector at once.
    Document.objects.create(study=study, kind="github_issue", external_id="later", cluster="o/r",
                            title="Zeppelin", body="mooring")  # fmt: skip
    assert [ext for ext, _ in found(study, "zeppelin mooring")] == ["later"]
    assert search_pending(study.pk) == 58


def test_the_search_page_says_what_is_still_being_indexed(client, alice, imported, study):
    client.force_login(alice)
    url = reverse("document_list", args=[study.slug])
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "Still indexing 58 documents for search" in html
    search_vectors_fill(study_id=study.pk)
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "Still indexing" not in html and "<mark>" in html


def test_one_waiting_job_serves_every_import_of_the_study(imported, study):
    first = Job.objects.get(study=study, kind=SEARCH_INDEX_JOB)
    assert search_index_queue(study=study) == first  # still waiting: no second job
    search_vectors_fill(study_id=study.pk)
    Job.objects.filter(pk=first.pk).update(status="success")
    assert search_index_queue(study=study) is None  # nothing pending: no job


def test_the_fill_works_in_batches_and_leaves_other_studies_alone(require_postgres, study, other_study):
    import_file(study=study, path=SAMPLES)
    import_file(study=other_study, path=SAMPLES)
    seen = []
    assert search_vectors_fill(study_id=study.pk, batch=10, progress=seen.append) == 58
    assert seen == [10, 20, 30, 40, 50, 58]
    assert search_pending(study.pk) == 0 and search_pending(other_study.pk) == 58
    assert search_vectors_fill() == 58 and search_pending(other_study.pk) == 0


@pytest.mark.usefixtures("eager_jobs")
def test_an_upload_is_searchable_once_its_jobs_ran(client, alice, study, django_capture_on_commit_callbacks):
    study.suggest_on_import = False
    study.save()
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.slug]),
                    {"file": SimpleUploadedFile("issues.json", SAMPLES.read_bytes())})  # fmt: skip
    assert Job.objects.get(kind="import").status == "success"
    if connection.vendor == "postgresql":
        assert Job.objects.get(kind=SEARCH_INDEX_JOB).status == "success"
    else:  # SQLite's triggers index every write at once
        assert not Job.objects.filter(kind=SEARCH_INDEX_JOB).exists()
    assert search_pending(study.pk) == 0
    assert len(found(study, "timeout")) == 3
    html = client.get(reverse("document_list", args=[study.slug]), {"q": "timeout"}).content.decode()
    assert "<mark>" in html and "Still indexing" not in html
