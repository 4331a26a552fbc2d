"""A real worker pool runs a bootstrap job as a chord of chunks: the same bytes as one process, and a chunk
whose worker process dies is redelivered, alone."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection, transaction

from annotate.analysis.documents import analysis_document
from annotate.analysis.params import Params
from annotate.jobs.runner import job_run
from annotate.models import Job, JobStatus
from annotate.tests.factories.analysis_factory import build, paper_rows

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

STRIP = ("generated_at", "run")
RECEIVED = re.compile(r"Task (annotate\.analysis_tasks\.\w+)\[([0-9a-f-]+)\] received")


def wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def finished(job: Job) -> Job:
    def done():
        job.refresh_from_db()
        return job.finished

    wait(done, 120, f"job {job.pk} to finish")
    return job


def received(log: Path) -> Counter:
    text = log.read_text() if log.exists() else ""
    return Counter((name.rsplit(".", 1)[1], task_id) for name, task_id in RECEIVED.findall(text))


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_it_gives_the_same_bytes_in_one_chunk_and_in_four(celery_worker, settings, study, codes, alice, bob, tmp_path):
    build(study, paper_rows(6, 8), codes, [alice, bob])
    queue = f"bootstrap-{uuid.uuid4().hex[:8]}"
    settings.FAULTLINE_ANALYSIS_QUEUE = queue
    log = tmp_path / "worker.log"
    celery_worker(queue, pool="prefork", concurrency=2, logfile=log)
    from annotate.jobs.tasks import run_job

    jobs = {}
    for chunks in (1, 4):
        job = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 1280, "seed": 6, "chunks": chunks})
        run_job.apply_async(args=[job.pk], queue=queue)
        jobs[chunks] = finished(job)
    one, four = jobs[1], jobs[4]
    assert one.status == four.status == JobStatus.SUCCESS, (one.error, four.error)
    assert (one.result["run"]["chunks"], four.result["run"]["chunks"]) == (1, 4)
    assert four.done == four.total == 1280  # progress counted the replicates of the four chunks
    assert one.result["run"]["replicates_sha256"] == four.result["run"]["replicates_sha256"]
    assert {k: v for k, v in one.result.items() if k not in STRIP} == {
        k: v for k, v in four.result.items() if k not in STRIP
    }
    inline = analysis_document(study, Params(bootstrap=1280, seed=6))
    assert {k: v for k, v in four.result.items() if k not in STRIP} == {
        k: v for k, v in inline.items() if k not in STRIP
    }
    assert sum(1 for name, _ in received(log) if name == "bootstrap_chunk") == 4


def test_it_redelivers_only_the_chunk_whose_worker_died(celery_worker, settings, study, codes, alice, bob, tmp_path):
    build(study, paper_rows(6, 8), codes, [alice, bob])
    queue = f"bootstrap-{uuid.uuid4().hex[:8]}"
    settings.FAULTLINE_ANALYSIS_QUEUE = queue
    log = tmp_path / "worker.log"
    worker = celery_worker(queue, pool="prefork", concurrency=2, logfile=log)
    reference = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 1280, "seed": 6, "chunks": 1})
    job_run(job_id=reference.pk)
    reference.refresh_from_db()
    assert reference.status == JobStatus.SUCCESS, reference.error

    job = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 1280, "seed": 6, "chunks": 4})
    # Hold the job's row: every chunk computes, then waits to count its progress, so a chunk is
    # certainly running in each of the two worker processes when one of them is killed.
    with transaction.atomic():
        Job.objects.select_for_update().get(pk=job.pk)
        job_run(job_id=job.pk)  # sends the chord (in this transaction, so the chunks see the row locked)

        def both_waiting():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # else this transaction sees one snapshot
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE %%annotate_job%%'"
                )
                return cursor.fetchone()[0] >= 2

        wait(both_waiting, 90, "two chunks waiting on the job row")
        victim = children(worker.pid)[0]
        os.kill(victim, signal.SIGKILL)
        wait(lambda: victim not in children(worker.pid), 30, "the worker to notice its lost process")
    # The lock goes with the transaction: the chunks still waiting, and the redelivered one, finish.
    finished(job)
    assert job.status == JobStatus.SUCCESS, job.error
    counts = received(log)
    chunk_counts = sorted(n for (name, _), n in counts.items() if name == "bootstrap_chunk")
    assert chunk_counts == [1, 1, 1, 2], counts  # four chunks; only the killed one was delivered twice
    assert sum(n for (name, _), n in counts.items() if name == "bootstrap_combine") == 1
    assert job.result["run"]["chunks"] == 4
    assert job.result["run"]["replicates_sha256"] == reference.result["run"]["replicates_sha256"]
    assert {k: v for k, v in job.result.items() if k not in STRIP} == {
        k: v for k, v in reference.result.items() if k not in STRIP
    }
