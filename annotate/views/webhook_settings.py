"""The owner's incident settings for a study: whether it takes incidents, where triaged incidents are sent
(the webhook and its signing secret), and a test event to check the receiver."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from annotate.incidents.webhook_settings import (
    TEST_EVENT,
    study_incident_intake_set,
    study_webhook_secret_rotate,
    study_webhook_set,
    study_webhook_test_send,
)
from annotate.models import Study
from annotate.views.access import study_view

RECENT_DELIVERIES = 10


def _post(request: HttpRequest, study: Study, context: dict) -> None:
    action = request.POST.get("action", "save")
    if action == "rotate":
        context["secret"] = study_webhook_secret_rotate(study=study)
    elif action == "intake":
        study_incident_intake_set(study=study, accepts=request.POST.get("accepts_incidents") == "on")
        context["intake_saved"] = True
    elif action == "test":
        context["test_event"] = study_webhook_test_send(study=study, user=request.user)
    else:
        context["url"] = request.POST.get("webhook_url", study.webhook_url)
        context["secret"] = study_webhook_set(study=study, url=context["url"])
        context["saved"] = True


def _test_result(study: Study, event_id: str) -> dict:
    delivery = study.webhook_deliveries.filter(event=TEST_EVENT, event_id=event_id).order_by("-id").first()
    return {"study": study, "test_event": event_id, "test_delivery": delivery}


@require_http_methods(["GET", "POST"])
@study_view("owner")
def webhook_settings(request: HttpRequest, study: Study) -> HttpResponse:
    """A POST that makes a secret renders it on this response only, never through a redirect or session."""
    context: dict = {
        "study": study, "secret": "", "errors": [], "url": study.webhook_url,
        "loopback_allowed": settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK and not settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE,
    }  # fmt: skip
    status = 200
    if request.method == "POST":
        try:
            _post(request, study, context)
        except ValidationError as exc:
            context["errors"], status = exc.messages, 400
    if context.get("test_event"):
        context.update(_test_result(study, context["test_event"]))
    context["deliveries"] = study.webhook_deliveries.order_by("-created_at", "-id")[:RECENT_DELIVERIES]
    response = render(request, "annotate/webhook_settings.html", context, status=status)
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@study_view("owner")
def webhook_test_result(request: HttpRequest, study: Study, event_id: str) -> HttpResponse:
    """The test event's answer once the worker has tried it (polled by the settings page)."""
    return render(request, "annotate/partials/_webhook_test.html", _test_result(study, event_id[:64]))
