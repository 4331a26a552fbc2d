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

Nothing is sent without a secret, and nothing to an address inside our own
network: the host is resolved and checked when an owner sets the URL and again
at every attempt, and the connection goes to the very address that was checked,
so a DNS answer that changes in between cannot redirect a delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotate.jobs.registry import task_named
from annotate.models import Document, Study, WebhookDelivery

log = logging.getLogger(__name__)
# The delivery task (annotate/incidents/tasks.py), looked up by its pinned name: that module imports this one.
DELIVER_WEBHOOK = "annotate.tasks.deliver_webhook"

USER_AGENT = "Faultline-Webhooks/1"
KEEP_ANSWER_BYTES = 500
UNSIGNED_REFUSAL = "not sent: the study has no webhook secret (an owner makes one on the study's webhook page)"


class WebhookRefused(ValueError):
    """A destination we will not send to; the message says why, for the owner."""

    expected_failure = True  # a refusal of the input: logged as one line (annotate.jobs.runner)


# IPv6 prefixes that carry an IPv4 address in their last 32 bits: IPv4-compatible (::/96, deprecated but
# still routed by some stacks) and the NAT64 well-known prefix (RFC 6052). A gateway translates them to
# the IPv4 address they embed, so they are judged by that address.
_EMBEDS_IPV4_LOW32 = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b::/96"))
# The local-use NAT64 prefix (RFC 8215) embeds IPv4 wherever its operator chose: never a public destination.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, compatible, NAT64, 6to4), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _EMBEDS_IPV4_LOW32):  # ::1 and :: become 0.0.0.1 and 0.0.0.0: refused too
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _address_allowed(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            ip = embedded
    # is_global is False for loopback, private, link-local (cloud metadata at 169.254.169.254),
    # shared (100.64/10), reserved and unspecified addresses.
    return ip.is_global and not ip.is_multicast


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def webhook_destination(url: str) -> tuple[str, int, list[str]]:
    """Check a webhook URL and resolve its host: (hostname, port, addresses), or WebhookRefused.

    Only http(s) URLs are allowed, and, unless FAULTLINE_WEBHOOK_ALLOW_PRIVATE is set, only hosts
    whose every address is public: a webhook must never reach the loopback, the private network
    or a cloud metadata service from inside our network. FAULTLINE_WEBHOOK_ALLOW_LOOPBACK (on by
    default under FAULTLINE_DEV) lets loopback addresses through, and only those.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookRefused(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused("use an http:// or https:// URL with a host name")
    if parts.username or parts.password:
        raise WebhookRefused("leave credentials out of the URL; the signature authenticates each delivery")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookRefused(f"the host {parts.hostname} does not resolve ({exc})") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise WebhookRefused(f"the host {parts.hostname} has no address")
    if not settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE:
        # Under FAULTLINE_DEV a receiver on this machine is fine: it is the developer's own.
        loopback_ok = settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK
        private = [a for a in addresses if not _address_allowed(a) and not (loopback_ok and _loopback(a))]
        if private:
            raise WebhookRefused(
                f"{parts.hostname} resolves to {', '.join(private[:3])}, a loopback, private, link-local or "
                "metadata address; webhooks go to public addresses only (FAULTLINE_WEBHOOK_ALLOW_PRIVATE=1 "
                "allows others)"
            )
    return parts.hostname, port, addresses


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


def _post(url: str, address: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    """POST to the checked address (not a fresh DNS answer), with the URL's Host and TLS name.

    Returns the status and, for a failure, at most KEEP_ANSWER_BYTES of the answer; a
    receiver that answers with megabytes is never read further.
    """
    import httpx  # here, not at the top: with its command line (rich, pygments) 20 MB in every web process

    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    headers = {**headers, "Host": parts.netloc}
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    with (
        httpx.Client(timeout=settings.FAULTLINE_WEBHOOK_TIMEOUT_S, follow_redirects=False) as client,
        client.stream("POST", target, content=body, headers=headers, extensions=extensions) as response,
    ):
        if 200 <= response.status_code < 300:
            return response.status_code, ""
        kept = b""
        for chunk in response.iter_bytes():
            kept += chunk
            if len(kept) >= KEEP_ANSWER_BYTES:
                break
        answer = kept[:KEEP_ANSWER_BYTES].decode("utf-8", "ignore")
        return response.status_code, f"HTTP {response.status_code}: {answer}"


def webhook_attempt(
    *, study_id: int, document_id: int | None, event: str, event_id: str, payload: dict, attempt: int
) -> WebhookDelivery | None:
    """Send one attempt and record it. None when the study has no webhook URL (any more).

    Without a secret nothing is sent (a receiver could not tell our events from forged ones), and
    the destination is checked again here: the attempt is recorded as failed, so it is retried.
    """
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
    }
    import httpx

    status_code, error = None, ""
    try:
        if not study.webhook_secret:
            raise WebhookRefused(UNSIGNED_REFUSAL)
        headers["X-Faultline-Signature"] = webhook_signature(study.webhook_secret, timestamp, body)
        _, _, addresses = webhook_destination(study.webhook_url)
        status_code, error = _post(study.webhook_url, addresses[0], body, headers)
    except WebhookRefused as exc:
        error = str(exc) if str(exc) == UNSIGNED_REFUSAL else f"not sent: {exc}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:KEEP_ANSWER_BYTES]
    return WebhookDelivery.objects.create(
        study=study, document_id=document_id, event=event, event_id=event_id, url=study.webhook_url,
        payload=json.loads(body), attempt=attempt, status_code=status_code, error=error, delivered=not error,
    )  # fmt: skip


def webhook_event_send(
    *, study: Study, document: Document | None, event: str, payload: dict[str, Any], retry: bool = True
) -> str:
    """Queue delivery of an event once the surrounding transaction commits. Returns the event id.

    With retry=False a failed attempt is recorded and not retried (a test event: its sender is
    watching for the one answer).
    """
    event_id = uuid.uuid4().hex
    args = {
        "study_id": study.pk, "document_id": document.pk if document else None, "event": event,
        "event_id": event_id, "payload": payload, "attempt": 1,
    }  # fmt: skip
    if not retry:
        args["retry"] = False

    def enqueue() -> None:
        try:
            task_named(DELIVER_WEBHOOK).apply_async(kwargs=args)
        except Exception:  # kombu raises several transport-specific errors; all mean "not sent"
            log.warning("could not enqueue webhook %s for study %s", event_id, study.slug, exc_info=True)

    transaction.on_commit(enqueue)
    return event_id
