"""Webhooks on a developer's machine: loopback allowed under FAULTLINE_DEV, and a signed test event on demand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.models import Study, WebhookDelivery
from tests.security.test_webhooks import Receiver

SETTINGS_URL = "/studies/alpha/settings/webhook/"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def dev_run(settings):
    """What `make run` (FAULTLINE_DEV=1) gives: loopback allowed, private ranges not."""
    settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK = True
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _secret(html: str) -> str:
    match = re.search(r'id="webhook-secret"[^>]*value="([^"]+)"', html)
    assert match, "the secret is shown once"
    return match.group(1)


@pytest.mark.parametrize(("dev", "expected"), [("1", "True"), ("", "False")])
def test_the_loopback_setting_follows_faultline_dev(dev, expected):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAULTLINE_", "DJANGO_DEBUG"))}
    env.update(FAULTLINE_DEV=dev, SECRET_KEY="x" * 60, DJANGO_SETTINGS_MODULE="config.settings")
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == expected, out.stderr[-2000:]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8001/hooks", "http://localhost:9000/x", "http://[::1]:8080/in"])
def test_a_dev_run_saves_a_loopback_url(client, alice, study, dev_run, url):
    client.force_login(alice)
    response = client.post(SETTINGS_URL, {"action": "save", "webhook_url": url})
    assert response.status_code == 200, response.content.decode()[:400]
    assert Study.objects.get(pk=study.pk).webhook_url == url
    assert "this machine's loopback" in response.content.decode()


@pytest.mark.parametrize(
    "url", ["http://10.1.2.3/x", "http://192.168.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[fd00::1]/"]
)
def test_a_dev_run_still_refuses_private_and_metadata_addresses(client, alice, study, dev_run, url):
    client.force_login(alice)
    response = client.post(SETTINGS_URL, {"action": "save", "webhook_url": url})
    assert response.status_code == 400
    assert Study.objects.get(pk=study.pk).webhook_url == ""


def test_production_refuses_the_loopback(client, alice, study):
    client.force_login(alice)  # the autouse fixture keeps FAULTLINE_WEBHOOK_ALLOW_LOOPBACK off
    assert client.post(SETTINGS_URL, {"action": "save", "webhook_url": "http://127.0.0.1:8001/h"}).status_code == 400


def test_a_test_event_reaches_the_receiver_signed_and_the_page_shows_its_answer(
    client, alice, study, dev_run, receiver, django_capture_on_commit_callbacks, eager_jobs
):
    client.force_login(alice)
    secret = _secret(client.post(SETTINGS_URL, {"action": "save", "webhook_url": receiver.url}).content.decode())
    assert 'id="send-test"' in client.get(SETTINGS_URL).content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # the delivery task runs once the POST commits
        page = client.post(SETTINGS_URL, {"action": "test"})
    event_id = page.context["test_event"]
    assert "waiting for the worker" in page.content.decode()  # rendered before the task ran, as with a worker
    [request] = receiver.requests
    assert receiver.verifies(request, secret)
    assert request["headers"]["X-Faultline-Event"] == "webhook.test"
    assert request["headers"]["X-Faultline-Delivery"] == event_id
    body = json.loads(request["body"])
    assert body["event"] == "webhook.test" and body["test"] is True and body["study"] == "alpha"
    result = client.get(f"{SETTINGS_URL}test/{event_id}/").content.decode()
    assert "✓ Test event delivered" in result and "HTTP 204" in result
    delivery = WebhookDelivery.objects.get(event_id=event_id)
    assert delivery.delivered and delivery.document is None and delivery.attempt == 1


def test_a_failed_test_event_shows_the_answer_and_is_not_retried(
    client, alice, study, dev_run, django_capture_on_commit_callbacks, settings, eager_jobs
):
    settings.FAULTLINE_WEBHOOK_BACKOFF_S = 0.0
    failing = Receiver(status=500, reply=b"receiver is down")
    try:
        client.force_login(alice)
        client.post(SETTINGS_URL, {"action": "save", "webhook_url": failing.url})
        with django_capture_on_commit_callbacks(execute=True):
            event_id = client.post(SETTINGS_URL, {"action": "test"}).context["test_event"]
        assert len(failing.requests) == 1
    finally:
        failing.close()
    result = client.get(f"{SETTINGS_URL}test/{event_id}/").content.decode()
    assert "✗ Test event not delivered" in result and "HTTP 500" in result and "receiver is down" in result
    assert WebhookDelivery.objects.filter(event_id=event_id).count() == 1


def test_a_test_event_needs_a_url_and_only_owners_send_one(client, alice, bob, study):
    client.force_login(bob)
    assert client.post(SETTINGS_URL, {"action": "test"}).status_code == 403
    client.force_login(alice)
    response = client.post(SETTINGS_URL, {"action": "test"})
    assert response.status_code == 400 and "Set a webhook URL first." in response.content.decode()


def test_a_bulk_assign_sends_one_signed_triaged_event_per_incident(
    study, alice, bob, dev_run, receiver, django_capture_on_commit_callbacks, eager_jobs
):
    from annotate.incidents.services import IncidentData, incident_create, incident_move, incidents_bulk_move
    from annotate.incidents.webhook_settings import study_webhook_set

    Study.objects.filter(pk=study.pk).update(accepts_incidents=True)
    study.refresh_from_db()
    secret = study_webhook_set(study=study, url=receiver.url)
    study.refresh_from_db()
    docs = [
        incident_create(study=study, user=bob, data=IncidentData(service="s", title=f"t{i}", description="d")).document
        for i in range(3)
    ]
    incident_move(document=docs[2], user=alice, to_status="resolved")
    with django_capture_on_commit_callbacks(execute=True):
        incidents_bulk_move(study=study, user=alice, document_ids=[d.pk for d in docs[:2]], action="assign",
                            assignee=bob)  # fmt: skip
    assert len(receiver.requests) == 2 and all(receiver.verifies(r, secret) for r in receiver.requests)
    bodies = sorted((json.loads(r["body"]) for r in receiver.requests), key=lambda b: b["incident"]["id"])
    assert [(b["event"], b["incident"]["id"], b["incident"]["assignee"], b["actor"]) for b in bodies] == [
        ("incident.triaged", docs[0].pk, "bob", "alice"), ("incident.triaged", docs[1].pk, "bob", "alice"),
    ]  # fmt: skip
