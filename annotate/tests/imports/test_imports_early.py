"""Batches written while the file is still being parsed (imports._EarlyWriters, PostgreSQL with two writers):
invisible until the whole file has parsed, rolled back when it is malformed, committed with checkpoints that
a killed run resumes from, and the same rows as a serial import. And, after a large import, fresh statistics."""

import json
import time

import pytest

from annotate.imports.parsed import ImportFileError
from annotate.models import Document, Episode

pytestmark = pytest.mark.django_db(transaction=True)
FIELDS = ["kind", "external_id", "cluster", "title", "body", "url", "labels", "meta", "raw", "content_hash"]


class Killed(BaseException):
    """Stands for the worker's death inside a checkpoint's transaction."""


def issues_file(tmp_path, n: int, *, bad_at: int | None = None, repeat: tuple[int, int] | None = None):
    issues = [
        {"html_url": f"https://github.com/acme/agent/issues/{i}", "number": i, "title": f"Tool call {i} times out",
         "body": f"The search tool timed out at step {i}.", "state": "open", "labels": [{"name": "bug"}]}
        for i in range(n)
    ]  # fmt: skip
    if bad_at is not None:
        issues[bad_at]["title"] = {"not": "a string"}
    if repeat is not None:
        first, again = repeat
        issues[again] = dict(issues[first], title="the same issue again")
    path = tmp_path / f"issues-{n}-{bad_at}.json"
    path.write_text(json.dumps(issues))
    return path


@pytest.fixture
def early(monkeypatch, settings):
    """Two writers, batches of 10, and a parse that waits at its 15th batch until the writers have written
    two batches early (the first two offers always find room, so that many always come): what a slow
    file does, made certain. `seen` holds, at that moment, how many
    documents this thread's connection can see (none: the writers' transactions are still open)."""
    from annotate.imports import _spool, _threads, services

    settings.FAULTLINE_IMPORT_WRITERS = 2
    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    made: list = []
    seen: list[int] = []

    class Waiting(_threads._EarlyWriters):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

        def offer(self, index, items, digests):
            if index == 15:
                deadline = time.monotonic() + 20
                while self.written < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen.append(Document.objects.count())
            return super().offer(index, items, digests)

    monkeypatch.setattr(services, "_EarlyWriters", Waiting)
    return made, seen


def stored(study):
    return sorted(Document.objects.filter(study=study).values_list(*FIELDS), key=lambda row: row[1])


def test_a_malformed_file_writes_nothing_though_its_first_batches_were_written(require_postgres, study, tmp_path,
                                                                                 early):  # fmt: skip
    from annotate.imports.services import import_file_resumable

    made, seen = early
    path = issues_file(tmp_path, 300, bad_at=290)
    with pytest.raises(ImportFileError, match="record 291"):
        import_file_resumable(study=study, path=path)
    assert made[0].written >= 2  # the writers did write before the bad record was reached
    assert seen == [0]  # and nobody could see it
    assert Document.objects.count() == Episode.objects.count() == 0
    assert not list(tmp_path.glob("*.spool*"))


def test_early_batches_commit_with_a_checkpoint_and_store_what_a_serial_import_does(
    require_postgres, study, other_study, tmp_path, early, monkeypatch
):
    from annotate.imports import services

    made, seen = early
    path = issues_file(tmp_path, 300, repeat=(3, 250))
    states: list[dict] = []
    result = services.import_file_resumable(study=study, path=path, on_batch=states.append)
    assert made[0].written >= 2 and seen == [0]
    # Each committed transaction bumped the data version once, under the writers' lock (issue 31).
    assert 1 <= type(study).objects.get(pk=study.pk).data_version <= len(states)
    assert (result.created, result.unchanged, result.skipped) == (299, 0, 1)
    assert states[-1]["records"] == states[-1]["total"] == 300 and states[-1]["through"] == 30
    records = [state["records"] for state in states]
    assert records == sorted(records) and len(states) <= 30 - made[0].written + len(made[0].threads)

    monkeypatch.setattr(services, "EARLY_WRITES", False)
    serial = services.import_file_resumable(study=other_study, path=path, writers=1)
    assert serial.as_dict() == result.as_dict()
    assert stored(study) == stored(other_study)
    assert Episode.objects.filter(study=study).count() == 299


@pytest.mark.parametrize("die_after", [0, 1])
def test_a_run_killed_while_early_batches_commit_resumes_without_losing_or_repeating_one(
    require_postgres, study, tmp_path, early, die_after
):
    """Killed at the first early checkpoint, nothing is committed; killed at the second, the first writer's
    batches are, with their checkpoint. Either way the retry, from the last checkpoint and the kept spool,
    imports every record exactly once and counts it once."""
    from annotate.imports.services import import_file_resumable, spool_path_for

    path = issues_file(tmp_path, 300)
    states: list[dict] = []

    def checkpoint(state):
        if len(states) >= die_after:
            raise Killed
        states.append(state)

    with pytest.raises(Killed):
        import_file_resumable(study=study, path=path, on_batch=checkpoint)
    kept = states[-1]["records"] if states else 0
    assert Document.objects.filter(study=study).count() == kept
    assert (kept == 0) == (die_after == 0)
    assert spool_path_for(path).exists()

    resumed = import_file_resumable(study=study, path=path, resume=states[-1] if states else None)
    assert (resumed.created, resumed.unchanged) == (300, 0)
    assert Document.objects.filter(study=study).count() == Episode.objects.filter(study=study).count() == 300
    assert not spool_path_for(path).exists()


def test_batches_taken_early_are_not_spooled_and_a_retry_missing_one_parses_the_file_again(
    require_postgres, study, tmp_path, early, monkeypatch
):
    """A batch an early writer took is spooled as a placeholder (its records are not written out twice); a
    retry whose checkpoint lacks such a batch cannot read it from the spool, so it parses the file again."""
    from annotate.imports import _spool
    from annotate.imports.records import ImportResult
    from annotate.imports.services import import_file_resumable, spool_path_for

    made, _ = early
    path = issues_file(tmp_path, 300)

    def die(state):
        raise Killed

    with pytest.raises(Killed):
        import_file_resumable(study=study, path=path, on_batch=die)
    lines = spool_path_for(path).read_bytes().splitlines()
    taken = [line for line in lines if line.startswith(_spool.SPOOL_TAKEN)]
    assert len(lines) == 30 and len(taken) >= made[0].written >= 2 and set(taken) == {b"-10"}
    assert Document.objects.filter(study=study).count() == 0

    parsed: list[str] = []
    iter_file = _spool.iter_file
    monkeypatch.setattr(_spool, "iter_file", lambda p, **kw: parsed.append(p.name) or iter_file(p, **kw))
    nothing_committed = {"records": 0, "total": 300, "result": ImportResult().as_dict(), "through": 0, "also": []}
    resumed = import_file_resumable(study=study, path=path, resume=nothing_committed)
    assert parsed == [path.name]  # the spool could not give the taken batches back
    assert (resumed.created, resumed.unchanged) == (300, 0)
    assert Document.objects.filter(study=study).count() == Episode.objects.filter(study=study).count() == 300


def test_a_large_import_refreshes_the_planners_statistics_and_a_small_one_does_not(require_postgres, study, tmp_path,
                                                                                     monkeypatch):  # fmt: skip
    """Without statistics that include a new study's rows, the planner takes it for empty (on 200,000 documents
    just imported, the documents list and search took 370-480 ms instead of 19-30 ms). The search_index job that
    follows an import of ANALYZE_AFTER documents or more ANALYZEs the tables first, off the import's critical
    path; ANALYZE reads a small table whole, so pg_class.reltuples then counts every row."""
    from django.db import connection

    from annotate.documents import services as documents
    from annotate.imports import services
    from annotate.jobs.runner import job_run
    from annotate.models import Job

    monkeypatch.setattr(documents, "ANALYZE_AFTER", 100)
    monkeypatch.setattr("annotate.documents.handlers.ANALYZE_AFTER", 100)

    def reltuples():
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'annotate_document'")
            return cursor.fetchone()[0]

    def follow_up():
        """The search_index job that the import queued, unless it ran already (eager jobs, committed import)."""
        for job in Job.objects.filter(study=study, kind="search_index", status="pending"):
            job_run(job_id=job.pk)
        assert Job.objects.get(study=study, kind="search_index", status="success")
        Job.objects.filter(study=study, kind="search_index").delete()

    before = reltuples()
    small = services.import_file_resumable(study=study, path=issues_file(tmp_path, 99))
    follow_up()
    assert small.created == 99 and reltuples() == before
    path = issues_file(tmp_path, 250)  # 99 of them unchanged, 151 new: over the threshold counts pending rows
    large = services.import_file(study=study, path=path)
    assert (large.created, large.unchanged) == (151, 99)
    follow_up()
    assert reltuples() == Document.objects.count() == 250 != before


@pytest.mark.parametrize("early_writes", [False, True])
def test_a_writer_runs_its_deferred_foreign_key_checks_before_it_takes_the_batches_lock(
    require_postgres, study, tmp_path, monkeypatch, settings, early_writes
):
    """The lock that orders checkpoints is held through the commit. The deferred foreign-key checks of a batch's
    rows run before it is taken, while the other writer works: at the commit they would run under it, one
    writer after another. So a batch whose rows break a reference fails before its checkpoint is counted."""
    from django.db import IntegrityError, connection

    from annotate.imports import _spool, _threads, records, services

    settings.FAULTLINE_IMPORT_WRITERS = 2
    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    monkeypatch.setattr(services, "EARLY_WRITES", early_writes)
    real_import, real_checkpoint = records.import_records, _spool._Batches.checkpoint
    counted: list[int] = []

    def import_records(**kwargs):
        result = real_import(**kwargs)
        if any(r.external_id == "acme/agent#20" for r in kwargs["records"]):  # batch 2: one broken reference
            with connection.cursor() as cursor:
                cursor.execute("UPDATE annotate_episode SET document_id = %s WHERE id = (SELECT max(id) "
                               "FROM annotate_episode)", [2**62])  # fmt: skip
        return result

    def checkpoint(self, written, on_batch):
        counted.extend(index for index, _, _ in written)
        return real_checkpoint(self, written, on_batch)

    monkeypatch.setattr(_threads, "import_records", import_records)
    monkeypatch.setattr(_spool, "import_records", import_records)
    monkeypatch.setattr(_spool._Batches, "checkpoint", checkpoint)
    with pytest.raises((ImportFileError, IntegrityError)):
        services.import_file_resumable(study=study, path=issues_file(tmp_path, 300))
    assert 2 not in counted
    assert not Episode.objects.filter(document_id=2**62).exists()
