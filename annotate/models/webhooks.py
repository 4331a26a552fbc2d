"""Outbound webhook deliveries, one row per attempt."""

from __future__ import annotations

from django.db import models

from annotate.models.documents import Document
from annotate.models.studies import Study


class WebhookDelivery(models.Model):
    """One delivery attempt of a study's outgoing webhook."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="webhook_deliveries")
    document = models.ForeignKey(Document, null=True, on_delete=models.SET_NULL, related_name="webhook_deliveries")
    event = models.CharField(max_length=50)
    event_id = models.CharField(max_length=64)
    url = models.URLField(max_length=1000)
    payload = models.JSONField()
    attempt = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    delivered = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.event} attempt {self.attempt}"
