"""Outgoing webhooks: the only module that sends HTTP to a study's webhook URL.

Each event is a JSON body signed with HMAC-SHA256 over "<timestamp>.<body>"
using the study's webhook secret (as Stripe and GitHub do), so a receiver can
check both origin and freshness:

    X-Faultline-Signature: sha256=<hex>
    X-Faultline-Timestamp: <unix seconds>
    X-Faultline-Event: incident.triaged
    X-Faultline-Delivery: <event id, the same on every retry>

Every attempt is recorded as a WebhookDelivery; the Celery task
`annotate.tasks.deliver_webhook` retries failures with exponential backoff.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import uuid
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Document, Study, WebhookDelivery

log = logging.getLogger(__name__)

USER_AGENT = "Faultline-Webhooks/1"


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Faultline-Signature value for a body sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook_body(*, event: str, event_id: str, study: Study, payload: dict[str, Any]) -> bytes:
    envelope = {"id": event_id, "event": event, "study": study.slug, "sent_at": timezone.now().isoformat(), **payload}
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


def webhook_backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): base, 2x base, 4x base, ..."""
    return settings.FAULTLINE_WEBHOOK_BACKOFF_S * (2 ** (attempt - 1))


def webhook_attempt(
    *, study_id: int, document_id: int | None, event: str, event_id: str, payload: dict, attempt: int
) -> WebhookDelivery | None:
    """Send one attempt and record it. None when the study has no webhook URL (any more)."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None or not study.webhook_url:
        return None
    body = webhook_body(event=event, event_id=event_id, study=study, payload=payload)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Faultline-Event": event,
        "X-Faultline-Delivery": event_id,
        "X-Faultline-Attempt": str(attempt),
        "X-Faultline-Timestamp": timestamp,
        "X-Faultline-Signature": webhook_signature(study.webhook_secret, timestamp, body),
    }
    status_code, error = None, ""
    try:
        response = httpx.post(
            study.webhook_url, content=body, headers=headers, timeout=settings.FAULTLINE_WEBHOOK_TIMEOUT_S
        )
        status_code = response.status_code
        if not 200 <= status_code < 300:
            error = f"HTTP {status_code}: {response.text[:500]}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:1000]
    return WebhookDelivery.objects.create(
        study=study, document_id=document_id, event=event, event_id=event_id, url=study.webhook_url,
        payload=json.loads(body), attempt=attempt, status_code=status_code, error=error, delivered=not error,
    )  # fmt: skip


def webhook_event_send(*, study: Study, document: Document | None, event: str, payload: dict[str, Any]) -> str:
    """Queue delivery of an event once the surrounding transaction commits. Returns the event id."""
    event_id = uuid.uuid4().hex
    args = {
        "study_id": study.pk, "document_id": document.pk if document else None, "event": event,
        "event_id": event_id, "payload": payload, "attempt": 1,
    }  # fmt: skip

    def enqueue() -> None:
        from .tasks import deliver_webhook

        try:
            deliver_webhook.apply_async(kwargs=args)
        except Exception:  # kombu raises several transport-specific errors; all mean "not sent"
            log.warning("could not enqueue webhook %s for study %s", event_id, study.slug, exc_info=True)

    transaction.on_commit(enqueue)
    return event_id
