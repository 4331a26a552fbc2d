"""The API's answer for a URL it does not have: a JSON 404, never the site's HTML page."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt  # nothing is read or written: a POST to a wrong URL gets the same 404, not a CSRF page
def api_not_found(request: HttpRequest, unknown: str = "") -> JsonResponse:
    detail = f"No API endpoint at {request.path}; the endpoints are listed at /api/v1/ and /api/docs/."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != "api-not-found":
            detail = f"No API endpoint at {request.path}; did you mean {request.path}/ (with the trailing slash)?"
    return JsonResponse({"detail": detail}, status=404)
