"""Cross-cutting request handling: login enforcement and security headers."""

from __future__ import annotations

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware

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
        signed_in = "HTTP_AUTHORIZATION" in request.META or request.user.is_authenticated
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
