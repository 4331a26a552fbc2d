"""The owner's webhook settings for a study: where triaged incidents are sent, and the signing secret."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from annotate.incidents.webhook_settings import study_webhook_secret_rotate, study_webhook_set
from annotate.models import Study
from annotate.views.access import study_view

RECENT_DELIVERIES = 10


@require_http_methods(["GET", "POST"])
@study_view("owner")
def webhook_settings(request: HttpRequest, study: Study) -> HttpResponse:
    """A POST that makes a secret renders it on this response only, never through a redirect or session."""
    context: dict = {"study": study, "secret": "", "errors": [], "url": study.webhook_url}
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "save")
        context["url"] = request.POST.get("webhook_url", study.webhook_url)
        try:
            if action == "rotate":
                context["secret"] = study_webhook_secret_rotate(study=study)
            else:
                context["secret"] = study_webhook_set(study=study, url=context["url"])
                context["saved"] = True
        except ValidationError as exc:
            context["errors"], status = exc.messages, 400
    context["deliveries"] = study.webhook_deliveries.order_by("-created_at", "-id")[:RECENT_DELIVERIES]
    response = render(request, "annotate/webhook_settings.html", context, status=status)
    response["Cache-Control"] = "no-store"
    return response
