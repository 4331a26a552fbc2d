"""The webhook delivery task (its name stays annotate.tasks.deliver_webhook wherever it lives)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="annotate.tasks.deliver_webhook", bind=True, acks_late=True, max_retries=None)
def deliver_webhook(
    self,
    *,
    study_id: int,
    document_id: int | None,
    event: str,
    event_id: str,
    payload: dict,
    attempt: int,
    retry: bool = True,
) -> bool:
    """One delivery attempt; a failed one is retried with exponential backoff up to the configured attempts."""
    from django.conf import settings

    from annotate.incidents.webhooks import webhook_attempt, webhook_backoff

    delivery = webhook_attempt(
        study_id=study_id, document_id=document_id, event=event, event_id=event_id, payload=payload, attempt=attempt
    )
    if delivery is None or delivery.delivered:
        return delivery is not None
    if not retry or attempt >= settings.FAULTLINE_WEBHOOK_MAX_ATTEMPTS:
        return False
    kwargs = {"study_id": study_id, "document_id": document_id, "event": event, "event_id": event_id,
              "payload": payload, "attempt": attempt + 1}  # fmt: skip
    raise self.retry(countdown=webhook_backoff(attempt), kwargs=kwargs)
