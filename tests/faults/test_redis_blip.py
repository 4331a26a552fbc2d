"""Redis, both broker and cache as docs/deploy.md recommends, stops for 30 s while four clients code through the API
and the pages and post incidents: no request fails, every incident is stored with its suggestion job pending, and
once Redis is back the same worker process runs every job, without anyone restarting anything."""

import threading
import time

import httpx
import pytest
from django.db import connections

from annotate.models import Coding, Job, JobStatus, Membership, Role
from annotate.studies.tokens import token_create
from tests.faults.conftest import CSRF_RE, app_env, logged_in, many_episodes, wait_for

pytestmark = [pytest.mark.usefixtures("incidents_open"), pytest.mark.services, pytest.mark.django_db(transaction=True)]

OUTAGE_S = 30
CODER_PAUSE_S = 0.2
CODES = {"failure_type": "EXT-01", "source": "tool_service", "stage": "iterative_execution",
         "capability": "actuation", "confidence": "high"}  # fmt: skip


class Client(threading.Thread):
    """One client looping over its own episodes until told to stop, recording every answer."""

    def __init__(self, name: str, step, items: list, pause_s: float = 0.05):
        super().__init__(name=name, daemon=True)
        self.step, self.items, self.pause_s = step, items, pause_s
        self.stop = threading.Event()
        self.statuses: list[tuple[float, int]] = []
        self.ok: list = []

    def run(self) -> None:
        try:
            for item in self.items:
                if self.stop.is_set():
                    return
                try:
                    status = self.step(item)
                except httpx.HTTPError as exc:  # a dropped connection is a failure too
                    status = f"{type(exc).__name__}"
                self.statuses.append((time.monotonic(), status))
                if status in (200, 201, 302):
                    self.ok.append(item)
                time.sleep(self.pause_s)
        finally:
            connections.close_all()  # this thread's own database connection


def token_client(base: str, user) -> httpx.Client:
    _, key = token_create(user=user, name="blip")
    return httpx.Client(base_url=base, timeout=20, headers={"Authorization": f"Token {key}"})


def test_a_30_second_redis_outage_fails_no_request_and_loses_no_job(
    require_postgres, private_redis, processes, study, alice, bob, django_user_model
):
    from conftest import PASSWORD

    carol = django_user_model.objects.create_user("carol", password=PASSWORD)
    dave = django_user_model.objects.create_user("dave", password=PASSWORD)
    for user in (carol, dave):
        Membership.objects.create(study=study, user=user, role=Role.CODER)
    episodes = many_episodes(study, [f"Episode {i}: the search tool timed out." for i in range(900)])
    cache_url = private_redis.url.rsplit("/", 1)[0] + "/1"
    env = app_env(CELERY_BROKER_URL=private_redis.url, REDIS_CACHE_URL=cache_url, FAULTLINE_CELERY_QUEUE="blip",
                  FAULTLINE_REQUEUE_EVERY_S="2", FAULTLINE_REQUEUE_AFTER_S="2", FAULTLINE_JOB_LEASE_S="20")  # fmt: skip
    worker = processes.worker(env, "blip")  # worker and beat boot while gunicorn does
    processes.beat(env)
    base = processes.web(env, workers=2)

    api_bob, api_carol, incidents_api = token_client(base, bob), token_client(base, carol), token_client(base, alice)
    pages_dave = logged_in(base, "dave")

    def api_save(client):
        def step(ep):
            return client.post("/api/v1/studies/alpha/codings/", json={"episode": ep.pk, **CODES}).status_code

        return step

    def page_save(ep):
        path = f"/studies/alpha/episodes/{ep.pk}/code/"
        page = pages_dave.get(path)
        if page.status_code != 200:
            return page.status_code
        token = CSRF_RE.search(page.text).group(1)
        return pages_dave.post(path, data={"csrfmiddlewaretoken": token, "version": "", **CODES}).status_code

    posted: list[tuple[float, dict]] = []

    def post_incident(n):
        response = incidents_api.post("/api/v1/incidents/", json={
            "study": "alpha", "service": "checkout-agent", "external_id": f"pd-{n}", "severity": "high",
            "title": f"Refund loop {n}", "description": "The refund tool was called in a loop.",
        })  # fmt: skip
        if response.status_code == 201:
            body = response.json()
            posted.append((time.monotonic(), body))
            # Read at once: an incident posted during the outage must have its job stored, pending.
            body["job_status_at_post"] = Job.objects.get(pk=body["suggestion_job"]).status
        return response.status_code

    # Coders pace themselves (0.2 s between saves) so that 300 episodes each outlast the run on any machine: unpaced,
    # a fast save let a client use up its episodes during the outage and have nothing left to go on with after it.
    clients = [
        Client("api-bob", api_save(api_bob), episodes[0:300], pause_s=CODER_PAUSE_S),
        Client("api-carol", api_save(api_carol), episodes[300:600], pause_s=CODER_PAUSE_S),
        Client("pages-dave", page_save, episodes[600:900], pause_s=CODER_PAUSE_S),
        Client("incidents", post_incident, list(range(10_000)), pause_s=0.5),
    ]
    for client in clients:
        client.start()
    wait_for(lambda: all(len(c.ok) >= 3 for c in clients), 120, "every client to be under way")

    private_redis.stop()
    outage = (time.monotonic(), time.monotonic() + OUTAGE_S)
    health = pages_dave.get("/healthz")
    assert health.status_code == 503 and health.json()["broker"]["ok"] is False
    time.sleep(OUTAGE_S)
    private_redis.start()
    back = time.monotonic()
    try:
        wait_for(lambda: all(len([t for t, _ in c.statuses if t > back]) >= 3 for c in clients), 120,
                 "every client to go on after the outage")  # fmt: skip
    except AssertionError as exc:
        after = {c.name: (len([t for t, _ in c.statuses if t > back]), len(c.statuses), len(c.items)) for c in clients}
        raise AssertionError(f"{exc}; (answers after, answers, items) per client: {after}") from None
    for client in clients:
        client.stop.set()
    for client in clients:
        client.join(timeout=60)

    # No request failed: not during the outage, not around it.
    failures = {c.name: [s for _, s in c.statuses if s not in (200, 201, 302)] for c in clients}
    assert failures == {c.name: [] for c in clients}
    during = {c.name: sum(1 for t, _ in c.statuses if outage[0] < t < outage[1]) for c in clients}
    assert all(n > 0 for n in during.values()), during  # every client really worked through the outage
    # Every incident posted while Redis was away was stored with its suggestion job pending.
    in_outage = [body for t, body in posted if outage[0] < t < outage[1]]
    assert in_outage and all(body["job_status_at_post"] == JobStatus.PENDING for body in in_outage)

    # Once Redis is back, every job finishes, run by the worker that was there all along.
    jobs = Job.objects.filter(kind="suggest")
    assert jobs.count() == len(posted)
    wait_for(lambda: not jobs.exclude(status=JobStatus.SUCCESS).exists(), 180, "every suggestion job to finish", 0.25)
    assert worker.poll() is None, processes.log("worker")[-3000:]
    assert "Unrecoverable error" not in processes.log("worker")
    assert not jobs.filter(attempts__gt=1).exists()

    # Every save a client saw succeed is stored, exactly once, with one creation in its history.
    for client, coder in ((clients[0], bob), (clients[1], carol), (clients[2], dave)):
        stored = Coding.objects.filter(coder=coder)
        assert set(stored.values_list("episode_id", flat=True)) == {ep.pk for ep in client.ok}
        assert all(c.history.filter(history_type="+").count() == 1 for c in stored)
