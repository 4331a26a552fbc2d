"""In a real browser: the study's Jobs page shows queued, running, stalled and retried jobs with their heartbeat,
and a job page says "worker lost, retrying" with its attempt."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotate.jobs.runner import job_claim, job_run, jobs_tend
from annotate.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_jobs_page_shows_every_state_and_a_lost_workers_job_says_so(page, live_server, login, shot, study, alice,
                                                                          monkeypatch):  # fmt: skip
    from annotate.jobs.tasks import run_job

    monkeypatch.setattr(run_job, "apply_async", lambda *a, **k: None, raising=False)  # no broker here
    page.goto(f"{live_server.url}/login/", timeout=60_000)  # a cold server on a busy machine answers slowly at first
    login("alice")
    Job.objects.create(kind="import", study=study, created_by=alice)
    running = Job.objects.create(kind="suggest", study=study, created_by=alice)
    stalled = Job.objects.create(kind="bootstrap", study=study, created_by=alice)
    lost = Job.objects.create(kind="import", study=study, created_by=alice)
    done = Job.objects.create(kind="recount", study=study, created_by=alice)
    for job in (running, stalled, lost):
        job_claim(job_id=job.pk)
    Job.objects.filter(pk=running.pk).update(done=400, total=1000)
    Job.objects.filter(pk__in=[stalled.pk, lost.pk]).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    job_run(job_id=done.pk)
    jobs_tend()  # re-queues both expired ones as "worker lost"
    job_claim(job_id=stalled.pk)  # one was taken again; its new worker stops sending heartbeats
    Job.objects.filter(pk=stalled.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=5))

    page.goto(f"{live_server.url}/studies/alpha/")
    page.get_by_role("link", name="Jobs").click()
    table = page.locator("section[aria-labelledby=active-jobs-h] table")
    expect(table.locator(f"tr:has-text('#{running.pk}')")).to_contain_text("Running")
    expect(table.locator(f"tr:has-text('#{running.pk}')")).to_contain_text("400 / 1000")
    expect(table.locator(f"tr:has-text('#{stalled.pk}')")).to_contain_text("Stalled")
    expect(table.locator(f"tr:has-text('#{stalled.pk}')")).to_contain_text("attempt 2 of 5")
    expect(table.locator(f"tr:has-text('#{lost.pk}')")).to_contain_text("worker lost, retrying")
    expect(page.locator("section[aria-labelledby=recent-jobs-h] table")).to_contain_text(f"Recount #{done.pk}")
    shot("study-jobs")

    page.get_by_role("link", name=f"Import #{lost.pk}").click()
    expect(page.locator(".job")).to_contain_text("worker lost, retrying")
    expect(page.locator(".job")).to_contain_text("attempt 2 of 5")
    shot("job-worker-lost")
