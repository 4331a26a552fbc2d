"""Documents an import left without search vectors never stay unsearchable because their search_index job failed:
beat's sweep starts another after a back-off, the search page says what happened and when indexing is tried again,
and exports and API lists filtered by words include the documents still waiting (issue 34).

PostgreSQL only (CI runs it), as in test_search_deferred: SQLite indexes every write at once.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from annotate.documents import handlers
from annotate.documents.search import SEARCH_INDEX_JOB, document_matches, search_pending
from annotate.documents.selectors import search_retry_after
from annotate.documents.services import search_index_sweep, search_vectors_fill
from annotate.imports.parsed import Record
from annotate.imports.parsers import iter_file
from annotate.imports.services import import_file
from annotate.jobs.runner import job_run
from annotate.models import Document, Episode, Job
from annotate.studies.tokens import token_create

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples" / "github_issues.json"
QUERIES = ["timeout", "rate limit", '"tool call"', "tool -json", "retry", "traceback", "context", "sandbox"]


@pytest.fixture
def imported(require_postgres, study):
    import_file(study=study, path=SAMPLES)
    assert search_pending(study.pk) == 58
    return Job.objects.get(study=study, kind=SEARCH_INDEX_JOB, status="pending")


def _fail(job: Job, monkeypatch) -> Job:
    """Run the job with a fill that breaks, as a bug or a lost disk would."""

    def broken(**kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as patched:
        patched.setattr(handlers, "search_vectors_fill", broken)
        job = job_run(job_id=job.pk)
    assert job.status == "failed"
    return job


def test_a_failed_search_index_job_is_started_again_by_the_sweep_after_its_back_off(imported, study, monkeypatch):
    failed = _fail(imported, monkeypatch)
    assert search_pending(study.pk) == 58  # nothing filled: without the sweep, unsearchable until the next import
    assert search_index_sweep(now=failed.finished_at + timedelta(seconds=59)) == []  # within the back-off
    [retry] = search_index_sweep(now=failed.finished_at + timedelta(seconds=61))
    assert (retry.kind, retry.study_id, retry.status) == (SEARCH_INDEX_JOB, study.pk, "pending")
    assert search_index_sweep(now=failed.finished_at + timedelta(hours=2)) == []  # one is waiting: no second

    # It fails again: the back-off doubles.
    again = _fail(retry, monkeypatch)
    assert search_index_sweep(now=again.finished_at + timedelta(seconds=119)) == []
    [third] = search_index_sweep(now=again.finished_at + timedelta(seconds=121))
    assert job_run(job_id=third.pk).status == "success"
    assert search_pending(study.pk) == 0
    assert search_index_sweep(now=timezone.now() + timedelta(days=1)) == []  # nothing left to index


def test_the_back_off_doubles_up_to_an_hour():
    assert [search_retry_after(failures=n).total_seconds() for n in (1, 2, 3, 6, 7, 20)] == [
        60, 120, 240, 1920, 3600, 3600,
    ]  # fmt: skip


def test_the_sweep_indexes_what_a_lost_job_left_and_leaves_live_imports_alone(imported, study, other_study):
    later = timezone.now() + timedelta(hours=1)
    assert search_index_sweep(now=later) == []  # the import's own job is waiting
    Job.objects.filter(pk=imported.pk).update(status="success")  # a job that ended without filling them all
    running = Job.objects.create(kind="import", study=study, status="running")
    assert search_index_sweep(now=later) == []  # an import still writing queues its own job when it ends
    Job.objects.filter(pk=running.pk).update(status="failed")
    [job] = search_index_sweep(now=later)
    assert job.study_id == study.pk and not Job.objects.filter(study=other_study).exists()
    assert job_run(job_id=job.pk).status == "success" and search_pending(study.pk) == 0


def test_beat_runs_the_sweep(imported, study, monkeypatch):
    import django.db

    from config.beat import TendingScheduler

    monkeypatch.setattr(django.db, "close_old_connections", lambda: None)  # the test's transaction stays open
    Job.objects.filter(pk=imported.pk).update(status="failed", finished_at=timezone.now() - timedelta(minutes=5))
    scheduler = SimpleNamespace(_next_sweep=0.0)
    TendingScheduler._sweep(scheduler)
    assert Job.objects.filter(study=study, kind=SEARCH_INDEX_JOB, status="pending").count() == 1
    assert scheduler._next_sweep > 0


def test_the_search_page_says_indexing_failed_and_when_it_is_tried_again(client, alice, imported, study,
                                                                        monkeypatch):  # fmt: skip
    client.force_login(alice)
    url = reverse("document_list", args=[study.slug])
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "Still indexing 58 documents" in html and "failed" not in html
    failed = _fail(imported, monkeypatch)
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "Indexing 58 documents for search failed" in html and "Still indexing" not in html
    retry = timezone.localtime(failed.finished_at + timedelta(seconds=60)).strftime("%H:%M")
    assert f"tried again automatically at about {retry}" in html
    Job.objects.filter(pk=failed.pk).update(finished_at=failed.finished_at - timedelta(minutes=5))
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "tried again automatically within a minute" in html  # due: the sweep's next round starts it
    search_index_sweep()
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "Still indexing 58 documents" in html and "failed" not in html


def test_word_filters_of_exports_and_lists_include_documents_still_being_indexed(imported, study, other_study):
    for record in iter_file(SAMPLES):
        if isinstance(record, Record):
            Document.objects.create(study=other_study, kind=record.kind, external_id=record.external_id,
                                    cluster=record.cluster, title=record.title, body=record.body)  # fmt: skip

    def matches(s) -> dict[str, list[str]]:
        return {q: sorted(document_matches(Document.objects.filter(study=s), q).values_list("external_id", flat=True))
                for q in QUERIES}  # fmt: skip

    reference = matches(other_study)  # indexed by the trigger as they were written
    assert all(reference.values()) and any(len(v) < 58 for v in reference.values())
    assert matches(study) == reference  # none of them indexed yet
    Document.objects.filter(study=study, external_id=reference["timeout"][0]).update(title="Timeout")  # indexed now
    assert search_pending(study.pk) == 57
    assert matches(study) == reference  # some indexed, some not
    search_vectors_fill(study_id=study.pk)
    assert matches(study) == reference


def test_an_export_filtered_by_words_right_after_an_import_has_every_match(client, alice, imported, study):
    _, token = token_create(user=alice, name="export")
    url = reverse("api-export", args=[study.slug])

    def exported() -> list[str]:
        response = client.get(url, {"format": "jsonl", "q": "timeout"}, HTTP_AUTHORIZATION=f"Token {token}")
        assert response.status_code == 200
        return [json.loads(line)["external_id"] for line in b"".join(response.streaming_content).splitlines()]

    before = exported()
    assert len(before) == 3 and search_pending(study.pk) == 58
    search_vectors_fill(study_id=study.pk)
    assert exported() == before
    assert Episode.objects.filter(study=study, document__external_id__in=before).count() == 3
