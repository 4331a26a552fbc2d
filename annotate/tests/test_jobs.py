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
