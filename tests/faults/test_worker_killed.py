"""A worker SIGKILLed whole mid-job: its job is re-queued after its lease expires, a new worker continues it
from the last committed batch, and it ends exactly as if nothing had happened."""

import json
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Count

from annotate.models import Document, Episode, Job, JobStatus, Suggestion
from annotate.suggestions.services import CHUNK
from annotate.tests.factories.llm_server import FakeLLMServer
from tests.faults.conftest import app_env, kill_whole, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

N = 40_000
LEASE_S = 10


def big_issue_file() -> Path:
    directory = Path(settings.MEDIA_ROOT) / "imports"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.json"
    issues = [
        {
            "url": f"https://api.github.com/repos/org{i % 300}/agent/issues/{i}",
            "repository_url": f"https://api.github.com/repos/org{i % 300}/agent",
            "html_url": f"https://github.com/org{i % 300}/agent/issues/{i}",
            "number": i,
            "title": f"Tool call {i} times out",
            "state": "open",
            "body": "The search tool timed out after 30 s and the agent gave up. " * 4,
            "labels": [{"name": "bug"}],
            "user": {"login": "someone"},
            "created_at": "2025-01-01T00:00:00Z",
            "updated_at": "2025-01-02T00:00:00Z",
        }
        for i in range(N)
    ]
    path.write_text(json.dumps(issues))
    return path


def job_env(redis, queue: str, **extra: str) -> dict:
    # A short lease and frequent beat rounds keep the test quick; the mechanism is the production one.
    return app_env(CELERY_BROKER_URL=redis.url, FAULTLINE_CELERY_QUEUE=queue, FAULTLINE_JOB_LEASE_S=str(LEASE_S),
                   FAULTLINE_REQUEUE_EVERY_S="2", FAULTLINE_REQUEUE_AFTER_S="1", **extra)  # fmt: skip


def hold_share_lock(table: str) -> psycopg.Connection:
    """A connection of the test's own holding a SHARE lock on `table` (writers wait; readers do not)."""
    db = connection.settings_dict
    conn = psycopg.connect(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, autocommit=False
    )
    conn.execute(f"LOCK TABLE {table} IN SHARE MODE")
    return conn


def reload(job: Job) -> Job:
    job.refresh_from_db()
    return job


def test_an_import_and_a_suggestion_batch_survive_their_worker_being_killed_whole(
    require_postgres, private_redis, runs_counted, processes, study, alice, make_episode
):
    for i in range(60):
        make_episode(study, body=f"Episode {i}: the provider answered 429 too many requests.")
    # Imports here must not start suggestion batches of their own: the test counts the model's requests.
    study.suggest_on_import = False
    study.save(update_fields=["suggest_on_import"])
    limit = 40
    path = big_issue_file()
    llm = FakeLLMServer().start()
    llm.delay_s = 0.2
    # Two chunks are answered and committed; the third chunk's first request hangs until the worker is killed.
    llm.script, llm.default, llm.hang_s = ["valid"] * (2 * CHUNK["openai"]), "hang", 120
    # One writer: batches commit one at a time, as the test needs to catch the import between two of them. With
    # two, the writers that work during the parse commit together when it ends, which on a quiet machine can be
    # the whole file at once (annotate.imports._threads._EarlyWriters).
    env = job_env(private_redis, "kill", OPENAI_API_KEY="test-key", OPENAI_BASE_URL=llm.base_url,
                  FAULTLINE_LLM_CONCURRENCY="1", FAULTLINE_IMPORT_WRITERS="1", **runs_counted.env)  # fmt: skip
    # Stored pending, as requests during a broker outage leave them: beat hands them to the worker.
    batch = Job.objects.create(
        kind="suggest", study=study, created_by=alice, params={"backend": "openai", "limit": limit}
    )
    imp = Job.objects.create(
        kind="import", study=study, created_by=alice,
        params={"path": f"imports/{path.name}", "filename": "big.json", "include_prs": False},
    )  # fmt: skip
    try:
        worker = processes.worker(env, "kill", concurrency=2)
        processes.beat(env)

        def imported() -> int:
            return reload(imp).checkpoint.get("import", {}).get("records", 0)

        # The import is caught mid-way however fast this machine imports (COPY writes 40,000 issues in seconds):
        # once it has committed a few batches, a connection of the test's own takes a SHARE lock on the
        # documents table, so the import's next batch waits for it, as a slow disk would make it wait.
        wait_for(lambda: imported() >= 3000, 300, "the import to commit some batches", interval=0.05)
        blocker = hold_share_lock("annotate_document")
        try:
            assert imported() < N, "the import finished before the test could catch it mid-way"
            # The third chunk's request hangs for 120 s: the batch is caught with two chunks committed.
            wait_for(lambda: Suggestion.objects.count() == 2 * CHUNK["openai"] and llm.inflight, 300,
                     "the batch to commit two chunks", interval=0.25)  # fmt: skip
            kill_whole(worker)
            killed_at = time.monotonic()
        finally:
            blocker.rollback()
            blocker.close()
        assert runs_counted.runs() == {imp.pk: 1, batch.pk: 1}
        llm.default = "valid"
        stopped_at = reload(imp).checkpoint["import"]["records"]
        assert stopped_at < N and Document.objects.filter(study=study).count() >= 60 + stopped_at
        assert reload(batch).status == JobStatus.RUNNING and Suggestion.objects.count() < limit
        assert path.exists()  # kept for the retry

        processes.worker(env, "kill", name="worker2", concurrency=2)
        wait_for(lambda: reload(batch).finished, LEASE_S + 60, "the batch to finish within the lease plus a minute")
        batch_took = time.monotonic() - killed_at
        wait_for(lambda: reload(imp).finished, LEASE_S + 60 + 300, "the import to finish on the new worker", 0.5)
        # On PostgreSQL the import queues its search_index follow-up, which the new worker runs too.
        wait_for(lambda: all(j.finished for j in Job.objects.filter(kind="search_index")), 120,
                 "the import's search_index follow-up to finish", 0.5)  # fmt: skip
    finally:
        llm.stop()
        path.unlink(missing_ok=True)

    # The test's own counter: each job's work started twice, on the killed worker and on the new one, never more.
    followups = {j.pk: 1 for j in Job.objects.filter(kind="search_index")}  # run once each, never killed
    assert runs_counted.runs() == {imp.pk: 2, batch.pk: 2, **followups}
    assert imp.status == JobStatus.SUCCESS, imp.error
    assert imp.attempts == 2  # the killed worker's claim, then the new worker's
    assert (imp.result["created"], imp.result["updated"], imp.done, imp.total) == (N, 0, N, N)
    imported = Document.objects.filter(study=study, kind="github_issue").exclude(external_id__startswith="acme/")
    assert imported.count() == N
    assert Episode.objects.filter(document__in=imported).count() == N
    assert not path.exists()

    assert batch.status == JobStatus.SUCCESS, batch.error
    assert batch.attempts == 2 and batch_took < LEASE_S + 60
    assert Suggestion.objects.filter(error="").count() == limit
    assert Suggestion.objects.count() == limit
    assert not Suggestion.objects.values("episode_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert (batch.result["episodes"], batch.result["suggested"]) == (limit, limit)
    # Only the chunk in flight when the worker died is asked again: at most one chunk beyond the limit.
    assert limit <= len(llm.requests) <= limit + CHUNK["openai"]
