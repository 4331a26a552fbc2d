"""Error answers in the caller's language: JSON under /api/, a page with a way back everywhere else.

Django calls these for an error no view answered itself (config/urls.py's handler400/403/404/500);
the API's catch-all route (api.views.errors) answers unknown /api/ URLs the same way even with DEBUG on.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.utils.http import url_has_allowed_host_and_scheme

MESSAGES = {
    400: "Bad request.",
    403: "You do not have permission to do this.",
    404: "Not found.",
    500: "The server failed on this request; it is logged. Try again, or tell an administrator.",
}


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def way_back(request: HttpRequest) -> str:
    """The page the user came from, if it is one of ours (never another site's address), as a path."""
    referer = request.META.get("HTTP_REFERER", "")
    if not referer or not url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    parts = urlsplit(referer)
    back = parts.path + (f"?{parts.query}" if parts.query else "")
    return "" if back == request.get_full_path() else back


def _answer(request: HttpRequest, status: int, exception=None) -> HttpResponse:
    message = str(exception) if exception is not None and str(exception) and status != 500 else ""
    if is_api(request):
        return JsonResponse({"detail": message or MESSAGES[status]}, status=status)
    context = {"exception": message, "message": message, "back": way_back(request)}
    return render(request, f"{status}.html", context, status=status)


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    return _answer(request, 400, exception)


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _answer(request, 403, exception)


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    # Whose study exists is not said, and Django's own messages name URL patterns: no message.
    return _answer(request, 404)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"detail": MESSAGES[500]}, status=500)
    # No context processors: whatever failed (the database, say) must not fail the error page too.
    return HttpResponse(loader.get_template("500.html").render(), status=500)
