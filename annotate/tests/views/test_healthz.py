from django.db import connection
from django.test import override_settings


def test_it_reports_database_and_broker_without_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_it_returns_503_when_the_broker_is_down(client, db):
    response = client.get("/healthz")  # nothing listens on port 1
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False
    assert response.json()["database"]["ok"] is True


def test_it_returns_503_when_the_database_is_down(client, db, monkeypatch):
    from annotate.views import health

    class DownConnection:
        def cursor(self):
            raise connection.Database.OperationalError("connection refused")

    monkeypatch.setattr(health, "connection", DownConnection())
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"]["ok"] is False


def test_anonymous_clients_get_each_components_status_only(client, db):
    body = client.get("/healthz").json()
    assert body == {"status": "ok", "database": {"ok": True}, "broker": {"ok": True}, "jobs": {"ok": True}}


def test_signed_in_users_get_job_counts_and_their_studies_unfinished_jobs(client, alice, charlie, study, other_study):
    from datetime import timedelta

    from django.utils import timezone

    from annotate.jobs.runner import job_claim
    from annotate.models import Job

    Job.objects.create(kind="import", study=study)
    running = Job.objects.create(kind="suggest", study=study)
    stalled = Job.objects.create(kind="bootstrap", study=study)
    Job.objects.create(kind="recount", study=other_study)  # Charlie's: counted, never listed for Alice
    Job.objects.create(kind="recount", study=study, retry_reason="worker lost")
    job_claim(job_id=running.pk)
    job_claim(job_id=stalled.pk)
    Job.objects.filter(pk=stalled.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    client.force_login(alice)
    jobs = client.get("/healthz").json()["jobs"]
    assert jobs["ok"] is False  # a stalled job
    assert {k: jobs[k] for k in ("queued", "running", "stalled", "retrying")} == {
        "queued": 2, "running": 1, "stalled": 1, "retrying": 1,
    }  # fmt: skip
    listed = {job["id"]: job for job in jobs["jobs"]}
    assert {job["study"] for job in listed.values()} == {"alpha"}
    assert listed[stalled.pk]["state"] == "stalled" and listed[stalled.pk]["last_heartbeat"]
    assert "detail" not in client.get("/healthz").json()["database"]  # error texts are for staff
