"""The LLM endpoint hangs or answers 500: suggestions end as failed with the error
recorded, and coding goes on with no web request waiting for the model."""

import time

import pytest

from annotate.models import Coding, Job, JobStatus, Suggestion, SuggestionStatus
from annotate.tests.factories.llm_server import FakeLLMServer
from tests.faults.conftest import app_env, csrf_of, logged_in, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_a_broken_llm_fails_suggestions_cleanly_and_never_blocks_coding(
    require_postgres, private_redis, processes, study, alice, bob, make_episode
):
    episodes = [make_episode(study, body=f"Episode {i}: the tool call timed out.") for i in range(4)]
    llm = FakeLLMServer().start()
    # The first requests hang past the client timeout, every later one is a 500.
    llm.script = ["hang"] * 4
    llm.default = "500"
    llm.hang_s = 30
    try:
        env = app_env(
            CELERY_BROKER_URL=private_redis.url, FAULTLINE_CELERY_QUEUE="llm", OPENAI_API_KEY="test-key",
            OPENAI_BASE_URL=llm.base_url, FAULTLINE_LLM_TIMEOUT="1", FAULTLINE_LLM_MAX_RETRIES="1",
            FAULTLINE_LLM_CONCURRENCY="2",
        )  # fmt: skip
        processes.worker(env, "llm")  # started first: it boots while gunicorn does
        base = processes.web(env)
        owner = logged_in(base, "alice")
        token = csrf_of(owner, "/studies/alpha/suggestions/")
        owner.post("/studies/alpha/suggestions/run/", data={"csrfmiddlewaretoken": token, "backend": "openai"})
        wait_for(lambda: Job.objects.filter(kind="suggest", status=JobStatus.RUNNING).exists(), 30, "the batch")

        # While the model hangs or fails, a coder codes: each request answers quickly.
        coder = logged_in(base, "bob")
        ep = episodes[0]
        started = time.monotonic()
        page = coder.get(f"/studies/alpha/episodes/{ep.pk}/code/")
        token = csrf_of(coder, f"/studies/alpha/episodes/{ep.pk}/code/")
        saved = coder.post(
            f"/studies/alpha/episodes/{ep.pk}/code/",
            data={"csrfmiddlewaretoken": token, "failure_type": "EXT-02", "source": "tool_service",
                  "stage": "iterative_execution", "capability": "actuation", "confidence": "high", "version": ""},
        )  # fmt: skip
        assert page.status_code == 200 and saved.status_code == 302
        assert time.monotonic() - started < 5
        assert Coding.objects.filter(episode=ep, coder=bob).exists()

        job = wait_for(lambda: Job.objects.filter(kind="suggest", status__in=["success", "failed"]).first(), 120,
                       "the batch to end")  # fmt: skip
    finally:
        llm.stop()

    rows = list(Suggestion.objects.filter(backend="openai"))
    assert len(rows) == len(episodes), job.error
    assert len(llm.requests) >= 2 * len(episodes)  # each episode was retried once
    for row in rows:
        assert row.status == SuggestionStatus.FAILED
        assert row.error  # the reason is recorded
        assert row.failure_type_id is None and row.candidates == []
