from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponsePermanentRedirect, JsonResponse
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotate.studies.selectors import jobs_health


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


def _jobs(user) -> dict:
    try:
        counts = jobs_health(user)
    except Exception:  # the database is down: that component already says so
        return {"ok": False}
    return {"ok": counts["stalled"] == 0, **counts}


# Load balancers and monitors probe this without a session: they get up or down per component.
# Why a component is down (hosts, ports, driver messages) is for staff only; any signed-in user
# gets the job counts and the unfinished jobs of their own studies.
@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    components = {"database": _database_ok(), "broker": _broker_ok()}
    signed_in = request.user.is_authenticated
    detailed = signed_in and request.user.is_staff
    healthy = all(ok for ok, _ in components.values())
    body: dict = {"status": "ok" if healthy else "unavailable"}
    for name, (ok, detail) in components.items():
        body[name] = {"ok": ok, "detail": _redacted(detail)} if detailed else {"ok": ok}
    jobs = _jobs(request.user if signed_in else None) if components["database"][0] else {"ok": False}
    body["jobs"] = jobs if signed_in else {"ok": jobs["ok"]}
    return JsonResponse(body, status=200 if healthy else 503)


# Browsers ask for /favicon.ico whatever the page links, before anyone logs in.
@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("favicon.svg"))
