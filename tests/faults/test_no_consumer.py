"""No worker consumes the queue for 3 minutes while beat runs: the queue keeps exactly one message per job, and
when a worker starts, each job runs exactly once and ends with the right status. The runs are counted by the
worker itself (run_counter.py, on the job_started signal), apart from the Job rows and the worker's log."""

import json
import re
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings

from annotate.models import Document, Job, JobStatus, Suggestion
from annotate.tests.factories.llm_server import FakeLLMServer, episode_from
from tests.faults.conftest import app_env, csrf_of, logged_in, wait_for

pytestmark = [pytest.mark.usefixtures("incidents_open"), pytest.mark.services, pytest.mark.django_db(transaction=True)]

# Beat tends every 2 s here (FAULTLINE_REQUEUE_EVERY_S): a minute is about 30 rounds that could each send a copy.
NO_CONSUMER_S = 60
QUEUE = "idle"


def upload(n: int, *, malformed: bool = False) -> str:
    directory = Path(settings.MEDIA_ROOT) / "imports"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.json"
    issues = [{"html_url": f"https://github.com/idle/agent/issues/{i}", "number": i, "title": f"Issue {i}",
               "body": "The agent looped.", "state": "open"} for i in range(n)]  # fmt: skip
    text = json.dumps(issues)
    path.write_text(text[:-30] if malformed else text)
    return f"imports/{path.name}"


def queued_job_messages(client: redis.Redis) -> list[int]:
    """The job ids of the run_job messages waiting in the queue (kombu keeps them as JSON in a Redis list)."""
    ids = []
    for raw in client.lrange(QUEUE, 0, -1):
        headers = json.loads(raw)["headers"]
        if headers["task"] == "annotate.tasks.run_job":
            ids.append(int(re.search(r"\d+", headers["argsrepr"]).group()))
    return ids


def test_jobs_queued_while_no_worker_runs_each_run_exactly_once(
    require_postgres, private_redis, runs_counted, processes, study, alice, make_episode
):
    episodes = [make_episode(study, body=f"Episode {i}: the planner never stopped.") for i in range(20)]
    # Imports here must not start suggestion batches of their own: the test counts the model's requests.
    study.suggest_on_import = False
    study.save(update_fields=["suggest_on_import"])
    llm = FakeLLMServer().start()
    try:
        env = app_env(
            CELERY_BROKER_URL=private_redis.url, FAULTLINE_CELERY_QUEUE=QUEUE, OPENAI_API_KEY="test-key",
            OPENAI_BASE_URL=llm.base_url, FAULTLINE_REQUEUE_EVERY_S="2", FAULTLINE_REQUEUE_AFTER_S="1",
            **runs_counted.env,
        )  # fmt: skip
        processes.beat(env)  # started first: it boots while gunicorn does
        base = processes.web(env)
        owner = logged_in(base, "alice")
        # Jobs whose message the web request sent at once: a suggestion batch and an incident's suggestion.
        token = csrf_of(owner, "/studies/alpha/suggestions/")
        owner.post("/studies/alpha/suggestions/run/", data={"csrfmiddlewaretoken": token, "backend": "openai"})
        token = csrf_of(owner, "/studies/alpha/")
        incident = owner.post("/api/v1/incidents/", headers={"X-CSRFToken": token}, json={
            "study": "alpha", "service": "planner", "title": "Planner loop", "description": "It never stopped.",
        })  # fmt: skip
        assert incident.status_code == 201, incident.text
        # Jobs stored pending with no message, as requests during a broker outage leave them: beat sends these.
        good_file = {"path": upload(300), "filename": "good.json", "include_prs": False}
        good = Job.objects.create(kind="import", study=study, created_by=alice, params=good_file)
        bad_file = {"path": upload(50, malformed=True), "filename": "bad.json"}
        bad = Job.objects.create(kind="import", study=study, created_by=alice, params=bad_file)
        recount = Job.objects.create(kind="recount", study=study, created_by=alice)
        jobs = list(Job.objects.order_by("pk"))
        assert len(jobs) == 5

        broker = redis.Redis(port=private_redis.port)
        most = 0
        deadline = time.monotonic() + NO_CONSUMER_S
        while time.monotonic() < deadline:
            most = max(most, len(queued_job_messages(broker)))
            time.sleep(1)
        # Beat ran about 30 rounds, and the queue holds exactly one message per job.
        assert sorted(queued_job_messages(broker)) == [job.pk for job in jobs]
        assert most == len(jobs)
        assert all(job.status == JobStatus.PENDING for job in Job.objects.all())

        processes.worker(env, QUEUE)
        wait_for(lambda: all(j.finished for j in Job.objects.all()), 180, "every job to finish", interval=0.5)
        # No copy is left to run later: none waits in the queue, none is held unacknowledged by the worker.
        wait_for(lambda: not broker.llen(QUEUE) and not broker.hlen("unacked"), 30, "the queue to drain")
    finally:
        llm.stop()

    # The follow-up an import queues on PostgreSQL (its search_index job) is a job like the others.
    jobs += list(Job.objects.filter(kind="search_index").exclude(pk__in=[j.pk for j in jobs]))
    # The test's own counter: each job's work started exactly once.
    assert runs_counted.runs() == {job.pk: 1 for job in jobs}
    statuses = {job.pk: (job.status, job.attempts) for job in Job.objects.all()}
    expected = {job.pk: (JobStatus.SUCCESS, 1) for job in jobs}
    expected[bad.pk] = (JobStatus.FAILED, 1)
    assert statuses == expected, {j.pk: j.error for j in Job.objects.all()}
    assert "Nothing was imported" in Job.objects.get(pk=bad.pk).error
    assert Job.objects.get(pk=good.pk).result["created"] == 300
    assert Job.objects.get(pk=recount.pk).finished
    # The counter the model server keeps: every episode was asked about exactly once.
    asked = [episode_from(request) for request in llm.requests]
    assert len(asked) == len(set(asked)) == len(episodes) + 1
    assert Suggestion.objects.count() == len(episodes) + 1
    assert Document.objects.filter(external_id__startswith="idle/agent#").count() == 300
    # And the worker received one message per job: no copy was left over to run again.
    received = re.findall(r"run_job\[([0-9a-f]+)\] received", processes.log("worker"))
    assert len(received) == len(set(received)) == len(jobs)
