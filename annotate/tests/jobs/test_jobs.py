"""Jobs: claimed once, leased and renewed, re-queued when their worker is lost, resumed where they stopped."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from annotate.jobs import registry
from annotate.jobs import runner as jobs
from annotate.jobs.runner import LeaseLost, job_checkpoint_save, job_claim, job_run, jobs_tend
from annotate.models import Document, Episode, Job, JobStatus, Suggestion
from annotate.suggestions.services import suggestion_batch_start


class WorkerDied(BaseException):
    """Stands for SIGKILL: nothing in the job machinery may catch it."""


@pytest.fixture
def sent(monkeypatch):
    """The run_job messages handed to Celery (there is no broker in these tests)."""
    from annotate.jobs.tasks import run_job

    messages: list[tuple[int, str]] = []
    monkeypatch.setattr(
        run_job, "apply_async", lambda args, task_id: messages.append((args[0], task_id)), raising=False
    )
    return messages


def expire_lease(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def die_at_checkpoint(monkeypatch, module, after: int) -> list[dict]:
    """Let `after` checkpoints commit, then kill the "worker" inside the next one's transaction."""
    saved: list[dict] = []

    def checkpoint(**kwargs):
        if len(saved) >= after:
            raise WorkerDied
        job_checkpoint_save(**kwargs)
        saved.append(kwargs["checkpoint"])

    monkeypatch.setattr(module, "job_checkpoint_save", checkpoint)
    return saved


def run_again(monkeypatch, job: Job) -> Job:
    """After a kill (die_at_checkpoint): the lease runs out, the tender re-queues the job, another delivery
    runs it to the end with real checkpoints, which must succeed."""
    monkeypatch.setattr(jobs, "job_checkpoint_save", job_checkpoint_save)
    expire_lease(job)
    jobs_tend()
    job = job_run(job_id=job.pk)
    assert job.status == JobStatus.SUCCESS, job.error
    return job


def test_the_job_page_polls_until_the_job_ends(client, bob, study):
    job = Job.objects.create(kind="recount", study=study, created_by=bob)
    client.force_login(bob)
    fragment = client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in fragment
    job_run(job_id=job.pk)
    fragment = client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in fragment
    assert "Succeeded" in fragment


def test_a_non_member_cannot_see_a_studys_job(client, charlie, study):
    job = Job.objects.create(kind="recount", study=study)
    client.force_login(charlie)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.get("/studies/alpha/jobs/").status_code == 404


def test_a_finished_job_is_not_run_again(study):
    job = Job.objects.create(kind="recount", study=study)
    job_run(job_id=job.pk)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.attempts == 1


def test_it_claims_a_pending_job_once_with_a_lease(study):
    job = Job.objects.create(kind="recount", study=study)
    first = job_claim(job_id=job.pk)
    assert first is not None and first.status == JobStatus.RUNNING and first.attempts == 1
    assert first.lease_owner and first.lease_expires_at > timezone.now() and first.heartbeat_at is not None
    assert job_claim(job_id=job.pk) is None


def test_a_second_delivery_of_a_running_job_does_nothing(study, monkeypatch):
    job = Job.objects.create(kind="recount", study=study)
    claimed = job_claim(job_id=job.pk)
    ran = []
    monkeypatch.setitem(registry.HANDLERS, "recount", record_run)
    monkeypatch.setattr("annotate.tests.jobs.test_jobs.RUNS", ran)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert ran == []
    assert (job.status, job.attempts, job.lease_owner) == (JobStatus.RUNNING, 1, claimed.lease_owner)


RUNS: list[int] = []


def record_run(*, job, progress):
    RUNS.append(job.pk)
    return {}


def test_a_job_whose_worker_was_lost_is_queued_again_and_its_page_says_so(client, alice, study, sent):
    job = Job.objects.create(kind="recount", study=study, created_by=alice)
    job_claim(job_id=job.pk)
    assert jobs_tend() == {"requeued": 0, "failed": 0, "sent": 0}  # a live lease is left alone
    expire_lease(job)
    client.force_login(alice)
    assert "stalled" in client.get(f"/jobs/{job.pk}/").content.decode().lower()

    assert jobs_tend()["requeued"] == 1
    job.refresh_from_db()
    assert (job.status, job.retry_reason, job.lease_owner) == (JobStatus.PENDING, "worker lost", "")
    assert sent == [(job.pk, job.message_id)]
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "worker lost, retrying" in page and f"attempt 2 of {settings.FAULTLINE_JOB_MAX_ATTEMPTS}" in page
    listing = client.get("/studies/alpha/jobs/").content.decode()
    assert "worker lost, retrying" in listing

    job = job_run(job_id=job.pk)
    assert (job.status, job.attempts, job.retry_reason) == (JobStatus.SUCCESS, 2, "")


def test_job_started_is_sent_once_per_run_of_the_work_and_again_for_a_retry(study, sent):
    started: list[tuple[int, int]] = []

    def receiver(sender, *, job, **kwargs):
        started.append((job.pk, job.attempts))

    def broken(sender, **kwargs):
        raise RuntimeError("a watcher's bug")

    jobs.job_started.connect(receiver)
    jobs.job_started.connect(broken)
    try:
        job = Job.objects.create(kind="recount", study=study)
        job_run(job_id=job.pk)
        job_run(job_id=job.pk)  # a second delivery of a finished job runs nothing, so sends nothing
        assert started == [(job.pk, 1)]

        lost = Job.objects.create(kind="recount", study=study)
        job_claim(job_id=lost.pk)  # its worker dies before the handler starts its work
        expire_lease(lost)
        jobs_tend()
        lost = job_run(job_id=lost.pk)
    finally:
        jobs.job_started.disconnect(receiver)
        jobs.job_started.disconnect(broken)
    assert started == [(job.pk, 1), (lost.pk, 2)]
    assert lost.status == JobStatus.SUCCESS  # a receiver that raises does not stop the job


def test_a_job_lost_too_often_fails_with_a_reason_instead_of_looping(study, sent):
    job = Job.objects.create(kind="recount", study=study)
    job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(attempts=settings.FAULTLINE_JOB_MAX_ATTEMPTS)
    expire_lease(job)
    assert jobs_tend()["failed"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "lost 5 times" in job.error
    assert sent == []


def test_a_job_whose_enqueue_failed_stays_pending_and_beat_sends_it(
    study, monkeypatch, django_capture_on_commit_callbacks
):
    from annotate.jobs.tasks import run_job

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(run_job, "apply_async", broker_down, raising=False)
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.job_start(kind="recount", study=study)
    job.refresh_from_db()
    assert (job.status, job.message_id) == (JobStatus.PENDING, "")

    calls = []
    monkeypatch.setattr(run_job, "apply_async", lambda args, task_id: calls.append(args[0]), raising=False)
    assert jobs_tend()["sent"] == 0  # the failed attempt was just now: the broker is likely still down
    five_minutes_ago = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(created_at=five_minutes_ago, enqueued_at=five_minutes_ago)
    assert jobs_tend()["sent"] == 1
    assert calls == [job.pk]
    # Without a broker to ask, a recorded message is trusted until the visibility timeout.
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now() - timedelta(minutes=5))
    assert jobs_tend()["sent"] == 0


def test_a_worker_that_lost_its_lease_cannot_commit_its_work(study, sent):
    job = Job.objects.create(kind="recount", study=study)
    stale = job_claim(job_id=job.pk)
    expire_lease(job)
    jobs_tend()
    fresh = job_claim(job_id=job.pk)
    assert fresh.lease_owner != stale.lease_owner
    with pytest.raises(LeaseLost):
        job_checkpoint_save(job=stale, checkpoint={"import": {"records": 1000}})
    job_checkpoint_save(job=fresh, checkpoint={"import": {"records": 10}})
    job.refresh_from_db()
    assert job.checkpoint == {"import": {"records": 10}}


def test_a_killed_suggestion_batch_resumes_without_redoing_work_or_passing_its_limit(
    study, alice, make_episode, monkeypatch, sent
):
    from annotate.suggestions import services as suggestions

    for i in range(30):
        make_episode(study, body=f"Episode {i}: the tool call timed out after 30 s and the agent gave up.")
    monkeypatch.setitem(suggestions.CHUNK, "local", 4)
    job = suggestion_batch_start(study=study, user=alice, backend="local", limit=18)
    saved = die_at_checkpoint(monkeypatch, suggestions, after=2)
    with pytest.raises(WorkerDied):
        job_run(job_id=job.pk)
    assert len(saved) == 2 and Suggestion.objects.count() == 8  # the third chunk died with its transaction

    monkeypatch.setattr(suggestions, "job_checkpoint_save", job_checkpoint_save)
    expire_lease(job)
    jobs_tend()
    job = job_run(job_id=job.pk)
    assert job.status == JobStatus.SUCCESS and job.attempts == 2
    assert Suggestion.objects.count() == 18
    assert not Suggestion.objects.values("episode").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert (job.result["episodes"], job.result["suggested"], job.done, job.total) == (18, 18, 18, 18)
    # A limited batch covers the first episodes in id order, as it would have without the kill.
    first_18 = list(Episode.objects.filter(study=study).order_by("id").values_list("id", flat=True)[:18])
    assert sorted(Suggestion.objects.values_list("episode_id", flat=True)) == first_18


def issue_file(n: int, *, bad_at: int | None = None) -> Path:
    directory = Path(settings.MEDIA_ROOT) / "imports"
    directory.mkdir(parents=True, exist_ok=True)
    # Its own name: the test processes share MEDIA_ROOT, and a job deletes its file and spool when it ends.
    path = directory / f"test-jobs-{n}-{bad_at}-{uuid.uuid4().hex}.json"
    issues = [
        {"html_url": f"https://github.com/acme/agent/issues/{i}", "number": i, "title": f"Tool call {i} times out",
         "body": "The search tool timed out.", "state": "open", "labels": [], "user": {"login": "someone"}}
        for i in range(n)
    ]  # fmt: skip
    if bad_at is not None:
        issues[bad_at]["title"] = {"not": "a string"}
    path.write_text(json.dumps(issues))
    return path


def import_job(study, alice, path: Path) -> Job:
    params = {"path": f"imports/{path.name}", "filename": "issues.json", "include_prs": False}
    return Job.objects.create(kind="import", study=study, created_by=alice, params=params)


def test_a_killed_import_resumes_after_its_last_batch_and_reports_the_whole_file(study, alice, monkeypatch, sent):
    from annotate.imports import _spool

    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    path = issue_file(45)
    job = import_job(study, alice, path)
    saved = die_at_checkpoint(monkeypatch, jobs, after=3)
    with pytest.raises(WorkerDied):
        job_run(job_id=job.pk)
    assert len(saved) == 3 and Document.objects.filter(study=study).count() == 30
    assert path.exists()  # the retry needs it

    job = run_again(monkeypatch, job)
    assert (job.result["created"], job.result["unchanged"], job.done, job.total) == (45, 0, 45, 45)
    assert Document.objects.filter(study=study).count() == 45
    assert Episode.objects.filter(study=study).count() == 45
    assert not path.exists()


def test_a_malformed_upload_imports_nothing_even_in_batches(study, alice, monkeypatch):
    from annotate.imports import _spool

    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    job = job_run(job_id=import_job(study, alice, issue_file(45, bad_at=40)).pk)
    assert job.status == JobStatus.FAILED and "Nothing was imported" in job.error
    assert Document.objects.filter(study=study).count() == 0


def test_the_jobs_list_shows_queued_running_stalled_and_finished_jobs(client, vera, study):
    queued = Job.objects.create(kind="import", study=study)
    running = Job.objects.create(kind="suggest", study=study)
    stalled = Job.objects.create(kind="bootstrap", study=study)
    done = Job.objects.create(kind="recount", study=study)
    job_claim(job_id=running.pk)
    job_claim(job_id=stalled.pk)
    expire_lease(stalled)
    job_run(job_id=done.pk)
    client.force_login(vera)  # viewers see the jobs too
    page = client.get("/studies/alpha/jobs/").content.decode()
    for job, state in [(queued, "queued"), (running, "running"), (stalled, "stalled"), (done, "success")]:
        assert f"job-row-{state}" in page and f"#{job.pk}<" in page
    assert "Last heartbeat" in page and 'hx-trigger="every 2s"' in page


def test_the_jobs_list_costs_the_same_queries_for_many_jobs(client, alice, study, django_assert_max_num_queries):
    client.force_login(alice)
    for _ in range(3):
        Job.objects.create(kind="recount", study=study, created_by=alice)
    client.get("/studies/alpha/jobs/")
    with django_assert_max_num_queries(8) as few:
        client.get("/studies/alpha/jobs/")
    Job.objects.bulk_create([Job(kind="recount", study=study, created_by=alice) for _ in range(40)])
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get("/studies/alpha/jobs/")


@pytest.mark.django_db(transaction=True)
def test_progress_inside_an_atomic_job_is_visible_to_pollers(require_postgres, study):
    import threading

    from django.db import connections, transaction

    from annotate.jobs.runner import job_progress_writer

    job = Job.objects.create(kind="recount", study=study)
    seen = []

    def poll():
        seen.append(Job.objects.values_list("done", "total").get(pk=job.pk))
        connections.close_all()

    with transaction.atomic():
        job_progress_writer(job)(5, 10)
        poller = threading.Thread(target=poll)
        poller.start()
        poller.join()
    assert seen == [(5, 10)]


def test_a_job_parses_its_file_once_and_its_retry_reads_the_spool(study, alice, monkeypatch, sent):
    from annotate.imports import _spool

    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    parsed: list[str] = []
    iter_file = _spool.iter_file
    monkeypatch.setattr(_spool, "iter_file", lambda path, **kw: parsed.append(path.name) or iter_file(path, **kw))
    path = issue_file(45)
    spool = _spool.spool_path_for(path)
    job = import_job(study, alice, path)
    die_at_checkpoint(monkeypatch, jobs, after=2)
    with pytest.raises(WorkerDied):
        job_run(job_id=job.pk)
    assert parsed == [path.name] and spool.is_file()

    job = run_again(monkeypatch, job)
    assert parsed == [path.name]  # the retry read the spool, not the file
    assert (job.result["created"], job.result["unchanged"], job.done, job.total) == (45, 0, 45, 45)
    assert Document.objects.filter(study=study).count() == 45
    assert not path.exists() and not spool.exists()


def test_a_retry_whose_spool_is_gone_parses_the_file_again(study, alice, monkeypatch, sent):
    from annotate.imports import _spool

    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    path = issue_file(45)
    job = import_job(study, alice, path)
    die_at_checkpoint(monkeypatch, jobs, after=3)
    with pytest.raises(WorkerDied):
        job_run(job_id=job.pk)
    _spool.spool_path_for(path).unlink()  # another machine's worker takes the retry, say

    job = run_again(monkeypatch, job)
    assert (job.result["created"], job.result["unchanged"], job.done, job.total) == (45, 0, 45, 45)
    assert Episode.objects.filter(study=study).count() == 45


def test_a_malformed_upload_leaves_no_spool(study, alice, monkeypatch):
    path = issue_file(45, bad_at=40)
    job = job_run(job_id=import_job(study, alice, path).pk)
    assert job.status == JobStatus.FAILED
    spools = list(path.parent.glob(path.name + ".spool*"))
    assert spools == [] and not path.exists()


def test_batches_committed_out_of_order_checkpoint_as_through_and_also():
    from annotate.imports._spool import _Batches
    from annotate.imports.records import ImportResult

    batches = _Batches(None, total=50)
    one = ImportResult(created=10)
    assert batches.commit(1, 10, one)["through"] == 0  # batch 0 is still being written
    state = batches.commit(3, 10, one)
    assert (state["through"], state["also"], state["records"]) == (0, [1, 3], 20)
    state = batches.commit(0, 10, one)
    assert (state["through"], state["also"], state["result"]["created"]) == (2, [3], 30)
    resumed = _Batches(state, total=50)
    items = list(range(10))
    assert [resumed.pending(i, i * 10, items) is not None for i in range(5)] == [False, False, True, False, True]
    assert [resumed.committed(i) for i in range(5)] == [True, True, False, True, False]
    # A checkpoint from before batches were numbered: the first `records` items are done.
    old = _Batches({"records": 25, "total": 50, "result": {"created": 25}}, total=50)
    assert old.pending(1, 10, items) is None and old.pending(2, 20, items) == [5, 6, 7, 8, 9]
    assert old.pending(3, 30, items) == items and "through" not in old.commit(2, 5, one)
    assert not any(old.committed(i) for i in range(5))  # the old form is read item by item


@pytest.mark.django_db(transaction=True)
def test_two_writers_import_every_batch_once_and_a_killed_run_resumes(require_postgres, study, alice, monkeypatch,
                                                                       sent, settings):  # fmt: skip
    """On PostgreSQL two connections write batches at once; checkpoints may then name batches out of order,
    and a retry writes exactly the ones that did not commit. A key repeated across batches is imported once."""
    from annotate.imports import _spool, services

    settings.FAULTLINE_IMPORT_WRITERS = 2
    monkeypatch.setattr(_spool, "BATCH_SIZE", 10)
    # Batches written during the parse commit together, so which checkpoint is the fourth would vary:
    # this test pins the per-batch phase; test_imports_early.py covers the early one.
    monkeypatch.setattr(services, "EARLY_WRITES", False)
    path = issue_file(95)
    issues = json.loads(path.read_text())
    issues[72] = dict(issues[3], title="the same issue again")  # a duplicate, six batches later
    path.write_text(json.dumps(issues))
    used = []
    write = services._write_spooled_batch
    monkeypatch.setattr(services, "_write_spooled_batch", lambda **kw: used.append(threading.current_thread().name)
                        or write(**kw))  # fmt: skip
    job = import_job(study, alice, path)
    saved = die_at_checkpoint(monkeypatch, jobs, after=4)
    with pytest.raises(WorkerDied):
        job_run(job_id=job.pk)
    assert len(saved) == 4 and Document.objects.filter(study=study).count() == 40
    assert used and set(used) <= {"import-writer-0", "import-writer-1"}  # never this thread's connection

    job = run_again(monkeypatch, job)
    assert (job.result["created"], job.result["unchanged"], job.done, job.total) == (94, 0, 95, 95)
    assert job.result["skip_reasons"] == "duplicate in this import: 1"
    assert job.checkpoint["import"]["through"] == 10 and job.checkpoint["import"]["also"] == []
    assert Document.objects.filter(study=study).count() == 94
    assert Episode.objects.filter(study=study).count() == 94
    assert Document.objects.get(study=study, external_id="acme/agent#3").title == "Tool call 3 times out"


def test_when_this_thread_fails_the_writers_skip_what_is_still_queued():
    """The spool fails to read, or the job's lease is found lost: batches already handed out but not yet
    started must not be written after the import has given up."""
    from annotate.imports._threads import _write_in_threads

    gate, written = threading.Event(), []

    def write(n):
        gate.wait(10)  # the first batch is in flight while the next one waits in the queue
        written.append(n)

    def tasks():
        yield (0,)
        yield (1,)
        threading.Timer(1.0, gate.set).start()  # the failure below is long handled when the batch finishes
        raise RuntimeError("the spool could not be read")

    with pytest.raises(RuntimeError):
        _write_in_threads(tasks(), write, 1, lambda: None)
    assert written == [0]
