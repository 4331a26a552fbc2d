"""The client's address, the one way: throttling (DRF) and log-in lock-outs (django-axes) both ask `client_ip`.

Behind N trusted proxies (FAULTLINE_NUM_PROXIES=N), each proxy appends the address it saw to
X-Forwarded-For, so the client is the Nth entry from the right; everything left of it was sent by
the client and can be forged. With no proxy (N=0, the default) the header is ignored entirely and
REMOTE_ADDR is the client. This is DRF's NUM_PROXIES rule, which settings.py sets from the same variable.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _valid(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def client_ip(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.FAULTLINE_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    addresses = [a.strip() for a in forwarded.split(",")]
    candidate = addresses[-min(proxies, len(addresses))]
    # A malformed entry means a misconfigured proxy chain; the proxy's own address is the safe answer.
    return candidate if _valid(candidate) else remote
