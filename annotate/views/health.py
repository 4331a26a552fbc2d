from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database_ok() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "down"; the message says why
        return False, str(exc).splitlines()[0][:200]
    return True, connection.vendor


def _broker_ok() -> tuple[bool, str]:
    if not settings.CELERY_BROKER_URL:
        return True, "eager (no broker configured)"
    from kombu import Connection

    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=2)
    except Exception as exc:
        return False, str(exc).splitlines()[0][:200]
    return True, "reachable"


def _redacted(detail: str) -> str:
    """An error text without credentials that a URL in it may carry."""
    return re.sub(r"//[^/@\s]*@", "//***@", detail)


# Load balancers and monitors probe this without a session. They get up or down per component;
# why a component is down (hosts, ports, driver messages) is for staff only.
@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    components = {"database": _database_ok(), "broker": _broker_ok()}
    detailed = request.user.is_authenticated and request.user.is_staff
    healthy = all(ok for ok, _ in components.values())
    body: dict = {"status": "ok" if healthy else "unavailable"}
    for name, (ok, detail) in components.items():
        body[name] = {"ok": ok, "detail": _redacted(detail)} if detailed else {"ok": ok}
    return JsonResponse(body, status=200 if healthy else 503)


# Browsers ask for /favicon.ico whatever the page links, before anyone logs in.
@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("favicon.svg"))
