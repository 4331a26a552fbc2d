"""Cross-cutting request handling: login enforcement, security headers, and a broker outage."""

from __future__ import annotations

import logging

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

# htmx is served from our own static files and we write no inline scripts, so
# script-src can stay 'self'. htmx adds its indicator styles inline, hence the
# style-src allowance.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class SecurityHeadersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
        return response


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    """Every page needs a login; the API answers 401 itself instead of redirecting.

    DRF authenticates by session or token and returns 401/403 JSON, which API
    clients expect, so /api/ is left to DRF's own permission classes.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


def _refuse(request, status: int, message: str):
    """A refusal in the caller's language: JSON for the API, a page otherwise."""
    from django.http import JsonResponse
    from django.shortcuts import render

    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return render(request, "400.html", {"message": message}, status=status)


def _valid_api_token(request) -> bool:
    """An API request carrying a live token: it may send an upload's worth. Any other header (a made-up
    token, or one on a page, where tokens do not sign anyone in) leaves the client anonymous."""
    if not request.path_info.startswith("/api/"):
        return False
    from api.authentication import token_for_header

    return token_for_header(request.META.get("HTTP_AUTHORIZATION", "")) is not None


class RequestLimitsMiddleware:
    """Refuse what no view should ever see: oversized bodies and NUL characters in the query.

    Django caps form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) but streams multipart files to disk
    whatever their size, so every body is checked against its declared length here, before
    anything reads it: FAULTLINE_MAX_ANON_BODY_KB for a client that is not signed in (the log-in
    form is a few hundred bytes), and the upload limit plus room for the form around it for
    everyone else. Django reads no more than Content-Length, so a chunked body without one is never
    read at all. A NUL in the query string would reach PostgreSQL, which refuses it in any text.
    Runs after AuthenticationMiddleware, which it asks whether the client is signed in.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = self._body_refusal(request) or self._query_refusal(request)
        return refusal or self.get_response(request)

    def _body_refusal(self, request):
        from django.conf import settings

        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not declared.isdigit():
            return _refuse(request, 400, "The Content-Length header is not a number.")
        size = int(declared)
        anonymous_limit = settings.FAULTLINE_MAX_ANON_BODY_KB * 1024
        if size <= anonymous_limit:
            return None
        limit = settings.FAULTLINE_MAX_REQUEST_MB * 1024 * 1024
        signed_in = request.user.is_authenticated or _valid_api_token(request)
        if not signed_in:
            return _refuse(request, 413, f"The request body is larger than {settings.FAULTLINE_MAX_ANON_BODY_KB} KB; "
                                         "sign in first.")  # fmt: skip
        if size > limit:
            upload = settings.FAULTLINE_MAX_UPLOAD_MB
            return _refuse(request, 413, f"The request body is larger than {settings.FAULTLINE_MAX_REQUEST_MB} MB "
                                         f"(uploads are limited to {upload} MB).")  # fmt: skip
        return None

    def _query_refusal(self, request):
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return _refuse(request, 400, f"The query parameter {key.replace(chr(0), '')!r} holds a NUL "
                                             "character (%00), which no value may contain.")  # fmt: skip
        return None


class BrokerUnavailableMiddleware:
    """A request whose answer needs the broker right now, while it is down, gets 503 with Retry-After.

    Requests that only start work never get here: their job is stored pending and
    sent later (annotate.jobs). This is for what cannot wait, and it keeps a
    broker outage from ever showing up as a 500.
    """

    RETRY_AFTER_S = 30

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from kombu.exceptions import OperationalError as BrokerError
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if not isinstance(exception, BrokerError | RedisConnectionError | RedisTimeoutError):
            return None
        logger.warning("broker unavailable during %s %s: %s", request.method, request.path, exception)
        message = "The job queue is unavailable for a moment; try again shortly."
        if request.path_info.startswith("/api/"):
            response = JsonResponse({"detail": message}, status=503)
        else:
            response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(self.RETRY_AFTER_S)
        return response
