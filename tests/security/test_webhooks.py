"""Webhooks an owner can trust: a secret made for them and shown once, and no deliveries to private addresses.

Deliveries go to a real HTTP receiver on 127.0.0.1, which needs FAULTLINE_WEBHOOK_ALLOW_PRIVATE=1;
the refusal of private destinations is tested with it off.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from annotate.incidents.webhooks import webhook_attempt
from annotate.models import Study, WebhookDelivery

SETTINGS_URL = "/studies/alpha/settings/webhook/"


class Receiver:
    """Records every POST; answers `status` with `reply` as the body."""

    def __init__(self, status: int = 204, reply: bytes = b""):
        self.requests: list[dict] = []
        self.status, self.reply = status, reply
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                self.send_response(receiver.status)
                self.send_header("Content-Length", str(len(receiver.reply)))
                self.end_headers()
                self.wfile.write(receiver.reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/faultline"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verifies(self, request: dict, secret: str) -> bool:
        """What a receiver does: recompute the signature over "<timestamp>.<body>" with its secret."""
        signed = request["headers"]["X-Faultline-Timestamp"].encode() + b"." + request["body"]
        expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, request["headers"]["X-Faultline-Signature"])

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def allow_private(settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = True


def _shown_secret(html: str) -> str:
    match = re.search(r'id="webhook-secret"[^>]*value="([^"]+)"', html)
    assert match, "the secret is shown"
    return match.group(1)


def _send_one(study: Study) -> WebhookDelivery | None:
    payload = {"incident": {"id": 1}}
    return webhook_attempt(study_id=study.pk, document_id=None, event="incident.triaged", event_id="e1",
                           payload=payload, attempt=1)  # fmt: skip


def test_setting_a_url_makes_a_secret_shown_once_that_signs_deliveries(client, alice, study, receiver, allow_private):
    client.force_login(alice)
    response = client.post(SETTINGS_URL, {"action": "save", "webhook_url": receiver.url})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    secret = _shown_secret(response.content.decode())
    assert len(secret) >= 32
    page = client.get(SETTINGS_URL).content.decode()
    assert secret not in page and "webhook-secret" not in page  # shown once only
    assert receiver.url in page
    delivery = _send_one(Study.objects.get(pk=study.pk))
    assert delivery.delivered and delivery.status_code == 204
    assert receiver.verifies(receiver.requests[0], secret)


def test_rotating_gives_a_new_secret_and_the_old_one_stops_verifying(client, alice, study, receiver, allow_private):
    client.force_login(alice)
    old = _shown_secret(client.post(SETTINGS_URL, {"action": "save", "webhook_url": receiver.url}).content.decode())
    # Saving the same URL again keeps the secret: receivers that verify keep working.
    again = client.post(SETTINGS_URL, {"action": "save", "webhook_url": receiver.url}).content.decode()
    assert "webhook-secret" not in again
    new = _shown_secret(client.post(SETTINGS_URL, {"action": "rotate"}).content.decode())
    assert new != old
    _send_one(Study.objects.get(pk=study.pk))
    assert receiver.verifies(receiver.requests[0], new)
    assert not receiver.verifies(receiver.requests[0], old)


def test_nothing_is_sent_without_a_secret(study, receiver, allow_private):
    Study.objects.filter(pk=study.pk).update(webhook_url=receiver.url, webhook_secret="")
    delivery = _send_one(study)
    assert receiver.requests == []
    assert not delivery.delivered and "secret" in delivery.error


def test_only_owners_manage_the_webhook(client, bob, vera, charlie, study):
    for user, status in ((bob, 403), (vera, 403), (charlie, 404)):
        client.force_login(user)
        assert client.get(SETTINGS_URL).status_code == status
        assert client.post(SETTINGS_URL, {"action": "rotate"}).status_code == status


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/x", "http://localhost/x", "http://[::1]/x", "http://10.1.2.3/x", "http://192.168.0.1/",
        "http://172.16.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
        "http://100.64.0.1/", "http://0.0.0.0/", "http://2130706433/", "http://[::ffff:127.0.0.1]/",
        "ftp://example.org/", "javascript:alert(1)",
    ],
)  # fmt: skip
def test_private_and_metadata_destinations_are_refused(client, alice, study, url, settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False
    client.force_login(alice)
    response = client.post(SETTINGS_URL, {"action": "save", "webhook_url": url})
    assert response.status_code == 400
    assert "webhook-secret" not in response.content.decode()
    assert Study.objects.get(pk=study.pk).webhook_url == ""


def test_delivery_checks_the_address_again(study, receiver, settings, monkeypatch):
    """A name that resolved to a public address when it was set may point at the loopback later."""
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False
    port = receiver.server.server_address[1]
    real = socket.getaddrinfo
    answers = {"hooks.example.test": "93.184.215.14"}

    def fake_dns(host, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_dns)
    from annotate.incidents.webhook_settings import study_webhook_set

    secret = study_webhook_set(study=study, url=f"http://hooks.example.test:{port}/in")
    assert secret
    answers["hooks.example.test"] = "127.0.0.1"  # DNS rebinding
    delivery = _send_one(Study.objects.get(pk=study.pk))
    assert receiver.requests == []
    assert not delivery.delivered and "127.0.0.1" in delivery.error


def test_a_failed_answer_is_kept_to_500_bytes(study, settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = True
    r = Receiver(status=500, reply="É".encode() * 100_000)  # two bytes a character
    try:
        Study.objects.filter(pk=study.pk).update(webhook_url=r.url, webhook_secret="s" * 40)
        delivery = _send_one(study)
    finally:
        r.close()
    assert delivery.status_code == 500 and not delivery.delivered
    assert delivery.error.startswith("HTTP 500: ÉÉ")
    assert delivery.error.count("É") == 250
    assert len(delivery.error.encode()) <= 520
