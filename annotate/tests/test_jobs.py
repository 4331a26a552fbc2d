import pytest

from annotate.jobs import job_run
from annotate.models import Job


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


def test_a_finished_job_is_not_run_again(study):
    job = Job.objects.create(kind="recount", study=study)
    job_run(job_id=job.pk)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.attempts == 1


def test_a_job_whose_enqueue_failed_stays_pending_and_is_requeued(
    study, monkeypatch, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from annotate import jobs, tasks

    calls = []

    def broker_down(job_id):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(tasks.run_job, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.job_start(kind="recount", study=study)
    job.refresh_from_db()
    assert job.status == "pending"

    monkeypatch.setattr(tasks.run_job, "delay", lambda job_id: calls.append(job_id))
    assert jobs.jobs_requeue() == 0  # too fresh to be considered lost
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert jobs.jobs_requeue() == 1
    assert calls == [job.pk]


@pytest.mark.django_db(transaction=True)
def test_progress_inside_an_atomic_job_is_visible_to_pollers(require_postgres, study):
    import threading

    from django.db import connections, transaction

    from annotate.jobs import job_progress_writer

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
