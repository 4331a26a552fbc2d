"""The fault tests' run counter counts runs of a job's work, not deliveries and not the Job row's attempts:
a job whose work ran twice reads 2 even when the row still says one attempt."""

import pytest

from annotate.jobs import runner as jobs
from annotate.models import Job, JobStatus
from tests.faults import run_counter
from tests.faults.conftest import RunCounter

pytestmark = [pytest.mark.services, pytest.mark.django_db]


@pytest.fixture
def counter(private_redis, monkeypatch) -> RunCounter:
    counter = RunCounter(private_redis)
    monkeypatch.setenv(run_counter.ENV, counter.url)  # this process counts, as a worker given counter.env does
    return counter


def test_it_counts_one_run_per_job_and_no_run_for_a_refused_delivery(counter, study):
    first = Job.objects.create(kind="recount", study=study)
    second = Job.objects.create(kind="recount", study=study)
    jobs.job_run(job_id=first.pk)
    jobs.job_run(job_id=first.pk)  # a second delivery of a finished job is refused: no run
    jobs.job_run(job_id=second.pk)
    assert counter.runs() == {first.pk: 1, second.pk: 1}


def test_it_sees_a_double_run_that_the_job_row_does_not_show(counter, study, monkeypatch):
    job = Job.objects.create(kind="recount", study=study)
    jobs.job_run(job_id=job.pk)
    # A broken claim that lets a copy of the message through runs the work a second time.
    claim = jobs.job_claim
    monkeypatch.setattr(jobs, "job_claim", lambda *, job_id: claim(job_id=job_id) or Job.objects.get(pk=job_id))
    jobs.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.SUCCESS, 1)  # the app's own bookkeeping misses it
    assert counter.runs() == {job.pk: 2}


def test_it_counts_nothing_without_its_redis(private_redis, study, monkeypatch):
    monkeypatch.delenv(run_counter.ENV, raising=False)
    job = Job.objects.create(kind="recount", study=study)
    jobs.job_run(job_id=job.pk)
    assert RunCounter(private_redis).runs() == {}
