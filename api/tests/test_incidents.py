"""Incident intake, triage moves with history, and the signed webhook, retried, against a real local receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from annotate.models import Artifact, Document, Episode, Job, TriageEvent, WebhookDelivery

pytestmark = pytest.mark.usefixtures("incidents_open")

OTEL_TRACE = {
    "resourceSpans": [
        {
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "name": "execute_tool refund_payment",
                            "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"},
                        }
                    ]
                }
            ]
        }
    ]
}


def _incident(**extra):
    return {
        "study": "alpha",
        "service": "checkout-agent",
        "title": "Agent refunded the same order three times",
        "description": "The refund tool was called in a loop.\n\n<script>alert('x')</script>",
        "severity": "high",
        "occurred_at": "2026-11-20T10:00:00Z",
        "trace": OTEL_TRACE,
        "artifacts": [
            {"kind": "db_change", "name": "payments diff", "content": "UPDATE payments SET refunded = 3 ..."},
            {"kind": "log", "name": "worker log", "url": "https://logs.example.org/run/42"},
        ],
        **extra,
    }


@pytest.fixture
def eager(monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def test_it_takes_an_incident_in_and_queues_a_suggestion(
    as_user, bob, study, eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = as_user(bob).post("/api/v1/incidents/", _incident(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    doc = Document.objects.get(pk=body["id"])
    assert (doc.kind, doc.cluster, doc.triage_status, doc.severity) == ("incident", "checkout-agent", "new", "high")
    assert doc.raw["trace"] == OTEL_TRACE
    episode = Episode.objects.get(document=doc)
    assert body["episode"] == episode.pk and episode.study == study
    assert [a.kind for a in Artifact.objects.filter(document=doc)] == ["db_change", "log"]
    job = Job.objects.get(pk=body["suggestion_job"])
    assert job.kind == "suggest" and job.params["episode_ids"] == [episode.pk]
    assert TriageEvent.objects.get(document=doc).to_status == "new"


def test_the_same_external_id_is_not_stored_twice(as_user, bob, study):
    client = as_user(bob)
    first = client.post("/api/v1/incidents/", _incident(external_id="pd-123"), format="json")
    again = client.post("/api/v1/incidents/", _incident(external_id="pd-123"), format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and again.json()["created"] is False
    assert Document.objects.filter(kind="incident").count() == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"title": ""}, "title"),
        ({"service": "x" * 301}, "service"),
        ({"severity": "apocalyptic"}, "severity"),
        ({"description": "x" * 200_001}, "description"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"artifacts": [{"kind": "video", "name": "v", "content": "c"}]}, "artifacts"),
        ({"artifacts": [{"kind": "log", "name": "both", "content": "c", "url": "https://x.org"}]}, "artifacts"),
        ({"artifacts": [{"kind": "log", "name": "js", "url": "javascript:alert(1)"}]}, "artifacts"),
        ({"artifacts": [{"kind": "log", "name": f"a{n}", "content": "c"} for n in range(21)]}, "artifacts"),
        ({"trace": {"blob": "x" * 1_000_001}}, "trace"),
    ],
)
def test_a_bad_payload_is_a_400_and_stores_nothing(as_user, bob, study, change, field):
    response = as_user(bob).post("/api/v1/incidents/", _incident(**change), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Document.objects.exists() and not Artifact.objects.exists() and not Job.objects.exists()


def test_a_missing_study_is_a_field_error(as_user, bob, study):
    body = _incident()
    del body["study"]
    response = as_user(bob).post("/api/v1/incidents/", body, format="json")
    assert response.status_code == 400 and "study" in response.json()


def test_triage_moves_are_checked_and_recorded(as_user, bob, alice, study):
    client = as_user(bob)
    doc = client.post("/api/v1/incidents/", _incident(), format="json").json()["id"]
    url = f"/api/v1/incidents/{doc}/triage/"
    assert "assignee" in client.post(url, {"status": "triaged"}, format="json").json()
    assert "assignee" in client.post(url, {"status": "triaged", "assignee": "vera"}, format="json").json()
    moved = client.post(url, {"status": "triaged", "assignee": "alice", "note": "payments team"}, format="json")
    assert moved.status_code == 200 and moved.json()["assignee"] == "alice"
    resolved = as_user(alice).post(url, {"status": "resolved"}, format="json").json()
    assert resolved["triage_status"] == "resolved"
    assert [(h["from_status"], h["to_status"], h["actor"]) for h in resolved["history"]] == [
        ("", "new", "bob"), ("new", "triaged", "bob"), ("triaged", "resolved", "alice"),
    ]  # fmt: skip
    assert "status" in client.post(url, {"status": "new"}, format="json").json()  # resolved -> new is not a move


class Receiver:
    """A webhook receiver on 127.0.0.1 that checks the signature, fails the first attempt, then accepts."""

    def __init__(self, secret: str):
        self.secret, self.requests = secret, []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                expected = "sha256=" + hmac.new(
                    receiver.secret.encode(), self.headers["X-Faultline-Timestamp"].encode() + b"." + body,
                    hashlib.sha256,
                ).hexdigest()  # fmt: skip
                valid = hmac.compare_digest(expected, self.headers.get("X-Faultline-Signature", ""))
                receiver.requests.append({"headers": dict(self.headers), "body": json.loads(body), "valid": valid})
                status = 401 if not valid else (503 if len(receiver.requests) == 1 else 204)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/faultline"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(study, settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    r = Receiver(secret="s3cret-for-tests")
    study.webhook_url, study.webhook_secret = r.url, r.secret
    study.save(update_fields=["webhook_url", "webhook_secret"])
    yield r
    r.close()


def test_triaging_posts_a_signed_webhook_and_retries_until_accepted(
    as_user, bob, study, receiver, eager, settings, django_capture_on_commit_callbacks
):
    settings.FAULTLINE_WEBHOOK_BACKOFF_S = 0.01
    client = as_user(bob)
    doc = client.post("/api/v1/incidents/", _incident(), format="json").json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        moved = client.post(f"/api/v1/incidents/{doc}/triage/", {"status": "triaged", "assignee": "bob"})
    assert moved.status_code == 200
    assert [r["valid"] for r in receiver.requests] == [True, True]
    first, second = receiver.requests
    assert first["headers"]["X-Faultline-Delivery"] == second["headers"]["X-Faultline-Delivery"]
    assert [first["headers"]["X-Faultline-Attempt"], second["headers"]["X-Faultline-Attempt"]] == ["1", "2"]
    event = second["body"]
    assert event["event"] == "incident.triaged" and event["study"] == "alpha"
    assert event["incident"]["id"] == doc and event["incident"]["assignee"] == "bob"
    deliveries = list(WebhookDelivery.objects.order_by("attempt"))
    assert [(d.attempt, d.status_code, d.delivered) for d in deliveries] == [(1, 503, False), (2, 204, True)]
    assert "503" in deliveries[0].error


def test_a_wrong_secret_fails_every_attempt_and_records_each(
    as_user, bob, study, receiver, eager, settings, django_capture_on_commit_callbacks
):
    settings.FAULTLINE_WEBHOOK_BACKOFF_S = 0.01
    settings.FAULTLINE_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.secret = "not the study's secret"
    client = as_user(bob)
    doc = client.post("/api/v1/incidents/", _incident(), format="json").json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/api/v1/incidents/{doc}/triage/", {"status": "triaged", "assignee": "bob"})
    assert [r["valid"] for r in receiver.requests] == [False, False, False]
    assert list(WebhookDelivery.objects.values_list("attempt", "status_code", "delivered")) == [
        (1, 401, False), (2, 401, False), (3, 401, False),
    ]  # fmt: skip


def test_backoff_doubles(settings):
    from annotate.incidents.webhooks import webhook_backoff

    settings.FAULTLINE_WEBHOOK_BACKOFF_S = 30
    assert [webhook_backoff(n) for n in (1, 2, 3)] == [30, 60, 120]


def test_an_incident_trace_gets_steps_and_its_artifacts_sit_under_their_span(as_user, bob, study, eager):
    from annotate.models import TraceStep
    from annotate.tests.factories.trace_fixtures import otlp_trace
    from annotate.traces.selectors import trace_window

    client = as_user(bob)
    payload = _incident(
        trace=otlp_trace(), external_id="inc-trace-1",
        artifacts=[{"kind": "diff", "name": "app.py", "content": "+x", "span_id": "t1"},
                   {"kind": "log", "name": "deploy.log", "content": "none", "step": 3}],
    )  # fmt: skip
    response = client.post("/api/v1/incidents/", payload, format="json")
    assert response.status_code == 201, response.content
    doc = Document.objects.get(external_id="inc-trace-1")
    assert TraceStep.objects.filter(document=doc).count() == 7
    body = response.json()
    assert {a["name"]: (a["span_id"], a["step"]) for a in body["artifacts"]} == {
        "app.py": ("t1", 4),
        "deploy.log": ("c1/call_2", 3),
    }
    ev = {r.step.name: r.evidence for r in trace_window(doc).rows if r.evidence}
    assert ev["run_tests"] == "effect" and ev["deploy"] == "effect" and ev["notify"] == "requested"
    bad = _incident(trace=otlp_trace(), artifacts=[{"kind": "diff", "name": "x", "content": "y", "span_id": "zz"}])
    response = client.post("/api/v1/incidents/", bad, format="json")
    assert response.status_code == 400 and "artifacts[0].span_id" in response.json()


@pytest.mark.parametrize("export", ["langfuse", "phoenix"])
def test_an_incident_trace_from_langfuse_or_phoenix_is_recognised_by_shape(as_user, bob, study, export):
    from annotate.models import TraceStep
    from annotate.tests.factories.trace_fixtures import langfuse_sdk_trace, phoenix_api_spans

    trace = langfuse_sdk_trace() if export == "langfuse" else phoenix_api_spans()
    response = as_user(bob).post("/api/v1/incidents/", _incident(trace=trace, artifacts=[]), format="json")
    assert response.status_code == 201, response.content
    steps = TraceStep.objects.filter(document_id=response.json()["id"]).order_by("index")
    expected = {"langfuse": ["refund_agent", "chat", "lookup_order", "issue_refund"],
                "phoenix": ["agent run", "ChatCompletion", "email", "search", "db_write"]}  # fmt: skip
    assert [s.name for s in steps] == expected[export]
    bad = {"data": [{"traceId": "t"}]} if export == "langfuse" else {"data": [{"context": {"trace_id": "t"}}]}
    response = as_user(bob).post("/api/v1/incidents/", _incident(trace=bad, artifacts=[]), format="json")
    assert response.status_code == 400 and f"This {export} trace is malformed" in str(response.json()["trace"])
