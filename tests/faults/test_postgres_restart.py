"""PostgreSQL restarts while coders save: requests in flight fail cleanly or succeed,
nothing is half-written, and the app recovers without being restarted."""

import threading

import pytest
from django.db import connection, connections
from django.db.models import Count

from annotate.models import Coding, Episode
from tests.faults.conftest import app_env, csrf_of, logged_in, many_episodes, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def server_started_at():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        return cursor.fetchone()[0]


def test_a_postgres_restart_mid_run_fails_cleanly_and_recovers(private_postgres, private_redis, processes, study, bob):
    # Everything below, gunicorn included, uses a PostgreSQL server of the test's own: restarting it
    # disturbs nobody else on the machine, and tests may run in parallel.
    episodes = many_episodes(study, ["The agent failed."] * 400)
    base = processes.web(app_env(CELERY_BROKER_URL=private_redis.url), workers=2)
    client = logged_in(base, "bob")
    seen_ok: list[int] = []
    statuses: list[int] = []
    stop = threading.Event()

    def code_loop():
        for ep in episodes:
            if stop.is_set():
                return
            path = f"/studies/alpha/episodes/{ep.pk}/code/"
            try:
                token = csrf_of(client, path)
                response = client.post(path, data={
                    "csrfmiddlewaretoken": token, "failure_type": "EXT-01", "source": "tool_service",
                    "stage": "iterative_execution", "capability": "actuation", "confidence": "high", "version": "",
                })  # fmt: skip
            except Exception:  # a failed page has no CSRF token, or the connection dropped: a clean failure
                statuses.append(-1)
                continue
            statuses.append(response.status_code)
            if response.status_code == 302:
                seen_ok.append(ep.pk)

    worker = threading.Thread(target=code_loop)
    worker.start()
    wait_for(lambda: len(seen_ok) >= 10, 60, "coding to be under way")
    started_before = server_started_at()
    private_postgres.restart()
    connections.close_all()  # this test's own connection died with the server too
    assert server_started_at() > started_before  # the server the app uses really restarted
    wait_for(lambda: len(seen_ok) >= 40, 120, "saves to succeed again after the restart")
    stop.set()
    worker.join(timeout=60)

    # Every answer was a success or a clean failure: no hang, no half-rendered page.
    assert set(statuses) <= {302, 500, 503, -1}, set(statuses)
    # Every save the client saw succeed is stored, exactly once, with its history.
    stored = set(Coding.objects.filter(coder=bob).values_list("episode_id", flat=True))
    assert set(seen_ok) <= stored
    assert Coding.objects.filter(coder=bob).count() == len(stored)
    # No partial writes: each episode's counter matches its codings, and each coding has its history row.
    mismatched = Episode.objects.filter(study=study).annotate(real=Count("codings")).exclude(n_codings=Count("codings"))
    assert not mismatched.exists()
    for coding in Coding.objects.filter(coder=bob):
        assert coding.history.filter(history_type="+").count() == 1
    # The app recovered by itself: the health check is green without a restart of gunicorn.
    assert client.get("/healthz").status_code == 200
