"""A real worker pool runs a bootstrap job in chunks (a Celery group) and gets the same document as one process."""

from __future__ import annotations

import time
import uuid

import pytest

from annotate.analysis import Params, analysis_document
from annotate.models import Job, JobStatus

from .analysis_factory import build, paper_rows


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_worker_pool_splits_the_bootstrap_into_chunks_with_the_same_result(celery_worker, study, codes, alice, bob):
    build(study, paper_rows(6, 8), codes, [alice, bob])
    queue = f"bootstrap-{uuid.uuid4().hex[:8]}"
    celery_worker(queue, pool="threads", concurrency=3)
    from annotate.tasks import run_job

    # Two chunks for the two threads that are free while the third runs the job (named here: counting
    # pool slots with a broadcast is timing-dependent on a loaded machine).
    job = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 1280, "seed": 6, "chunks": 2})
    run_job.apply_async(args=[job.pk], queue=queue)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.finished:
            break
        time.sleep(0.3)
    assert job.status == JobStatus.SUCCESS, job.error
    assert job.result["run"]["chunks"] == 2
    inline = analysis_document(study, Params(bootstrap=1280, seed=6))
    strip = ("generated_at", "run")
    assert {k: v for k, v in job.result.items() if k not in strip} == {
        k: v for k, v in inline.items() if k not in strip
    }
