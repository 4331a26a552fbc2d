from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
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


# Load balancers and monitors probe this without a session; it reveals only up/down.
@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db_ok, db_detail = _database_ok()
    broker_ok, broker_detail = _broker_ok()
    body = {
        "status": "ok" if db_ok and broker_ok else "unavailable",
        "database": {"ok": db_ok, "detail": db_detail},
        "broker": {"ok": broker_ok, "detail": broker_detail},
    }
    return JsonResponse(body, status=200 if db_ok and broker_ok else 503)
