"""Writes for a study's incident settings: whether it takes incidents, its webhook URL and secret, a test event."""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.db import transaction

from annotate.incidents.webhooks import WebhookRefused, webhook_destination, webhook_event_send
from annotate.models import Study

SECRET_BYTES = 32
MAX_URL = 200  # Study.webhook_url is a URLField of Django's default length


def _new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(SECRET_BYTES)


@transaction.atomic
def study_webhook_set(*, study: Study, url: str) -> str:
    """Set (or, with "", remove) the study's webhook URL. Returns a new secret, or "" if none was made.

    A secret is made when a URL is set on a study without one; changing the URL keeps the secret,
    so a receiver that verifies signatures keeps working. Removing the URL removes the secret.
    The destination must pass webhook_destination (public addresses only, unless allowed).
    """
    url = url.strip()
    if not url:
        study.webhook_url, study.webhook_secret = "", ""
        study.save(update_fields=["webhook_url", "webhook_secret"])
        return ""
    if len(url) > MAX_URL:
        raise ValidationError({"webhook_url": f"At most {MAX_URL} characters."})
    try:
        webhook_destination(url)
    except WebhookRefused as exc:
        raise ValidationError({"webhook_url": f"Refused: {exc}."}) from None
    secret = "" if study.webhook_secret else _new_secret()
    study.webhook_url = url
    if secret:
        study.webhook_secret = secret
    study.save(update_fields=["webhook_url", "webhook_secret"])
    return secret


@transaction.atomic
def study_webhook_secret_rotate(*, study: Study) -> str:
    """Replace the study's webhook secret; the old one stops verifying with the next event. Returns the new one."""
    if not study.webhook_url:
        raise ValidationError({"webhook_url": "Set a webhook URL first."})
    study.webhook_secret = _new_secret()
    study.save(update_fields=["webhook_secret"])
    return study.webhook_secret


@transaction.atomic
def study_incident_intake_set(*, study: Study, accepts: bool) -> Study:
    """Open or close the study to incidents posted through the API (annotate.incidents.services.incident_intake_check).

    Closing keeps the incidents already stored: they stay on the board and in the coding queue.
    """
    study.accepts_incidents = bool(accepts)
    study.save(update_fields=["accepts_incidents"])
    return study


TEST_EVENT = "webhook.test"


@transaction.atomic
def study_webhook_test_send(*, study: Study, user) -> str:
    """Send a signed test event through the delivery task, once and without retries. Returns its event id.

    It goes the way every event goes (webhook_event_send: queued on commit, attempted by the
    Celery task, recorded as a WebhookDelivery), so a receiver that accepts it accepts real events.
    """
    if not study.webhook_url:
        raise ValidationError({"webhook_url": "Set a webhook URL first."})
    if not study.webhook_secret:
        raise ValidationError({"webhook_url": "Create a signing secret first: an unsigned event is never sent."})
    payload = {
        "test": True,
        "actor": user.get_username(),
        "message": "A test event from Faultline: if your receiver verified its signature, real events verify too.",
    }
    return webhook_event_send(study=study, document=None, event=TEST_EVENT, payload=payload, retry=False)
