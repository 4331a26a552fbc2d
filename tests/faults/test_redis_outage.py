"""Redis stops during a suggestion batch: pages keep working, /healthz says the broker
is down, jobs are kept and finish once Redis is back, and no suggestion is duplicated."""

import time

import pytest
from django.db.models import Count

from annotate.models import Job, JobStatus, Suggestion
from annotate.tests.factories.llm_server import FakeLLMServer
from tests.faults.conftest import app_env, csrf_of, logged_in, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_a_redis_outage_loses_no_job_and_duplicates_no_suggestion(
    require_postgres, private_redis, processes, study, alice, make_episode
):
    episodes = [make_episode(study, body=f"Episode {i}: the provider answered 429 too many requests.")
                for i in range(24)]  # fmt: skip
    llm = FakeLLMServer().start()
    llm.delay_s = 0.25  # slow enough that the outage lands mid-batch
    try:
        env = app_env(
            CELERY_BROKER_URL=private_redis.url, FAULTLINE_CELERY_QUEUE="outage",
            OPENAI_API_KEY="test-key", OPENAI_BASE_URL=llm.base_url, FAULTLINE_LLM_CONCURRENCY="1",
            FAULTLINE_REQUEUE_EVERY_S="1", FAULTLINE_REQUEUE_AFTER_S="1",
        )  # fmt: skip
        processes.worker(env, "outage")  # worker and beat boot while gunicorn does
        processes.beat(env)
        base = processes.web(env)
        client = logged_in(base, "alice")

        token = csrf_of(client, "/studies/alpha/suggestions/")
        response = client.post("/studies/alpha/suggestions/run/", data={"csrfmiddlewaretoken": token,
                                                                       "backend": "openai"})  # fmt: skip
        assert response.status_code in (200, 302)
        first = wait_for(lambda: Job.objects.filter(kind="suggest").first(), 10, "the first job")
        wait_for(lambda: Suggestion.objects.exists(), 60, "the batch to start writing suggestions")

        private_redis.stop()
        # The site keeps serving pages, and the health check names the broker.
        assert client.get("/studies/alpha/").status_code == 200
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["broker"]["ok"] is False
        assert health.json()["database"]["ok"] is True

        # A job started during the outage is accepted quickly and kept.
        token = csrf_of(client, "/studies/alpha/suggestions/")
        started = time.monotonic()
        response = client.post("/studies/alpha/suggestions/run/", data={"csrfmiddlewaretoken": token,
                                                                       "backend": "openai"})  # fmt: skip
        assert time.monotonic() - started < 10
        assert response.status_code in (200, 302)
        second = wait_for(lambda: Job.objects.filter(kind="suggest").exclude(pk=first.pk).first(), 10, "job 2")
        time.sleep(2)
        private_redis.start()

        def all_done():
            jobs = list(Job.objects.filter(kind="suggest"))
            return all(j.status in (JobStatus.SUCCESS, JobStatus.FAILED) for j in jobs) and jobs

        jobs = wait_for(all_done, 120, "both jobs to finish after Redis returns", interval=0.5)
        assert [j.status for j in jobs] == [JobStatus.SUCCESS, JobStatus.SUCCESS], [j.error for j in jobs]
        assert {first.pk, second.pk} == {j.pk for j in jobs}
        assert client.get("/healthz").status_code == 200
    finally:
        llm.stop()

    usable = Suggestion.objects.filter(backend="openai", error="")
    assert usable.count() == len(episodes)
    dupes = Suggestion.objects.values("episode_id", "cache_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not dupes.exists()
