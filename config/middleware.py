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
        # Swagger UI loads its own bundle and inline bootstrap; it gets its own policy.
        if not request.path.startswith("/api/docs"):
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
