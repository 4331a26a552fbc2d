"""Token authentication against hashed keys (annotate.ApiToken).

DRF's stock TokenAuthentication keeps keys in clear text; we store a sha256
and compare hashes, so a database leak does not leak usable tokens.
"""

from __future__ import annotations

import hashlib

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from annotate.models import ApiToken
from lib.db.prepared import Prepared

# Every API request with a token asks this first: compiled once (lib.db.prepared).
_LIVE_TOKEN = Prepared(
    lambda key_hash: ApiToken.objects.select_related("user").filter(key_hash=key_hash, revoked_at__isnull=True)[:1],
    key_hash=str,
)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def live_token(key: str) -> ApiToken | None:
    """The unrevoked token of an active user with this key, or None."""
    token = _LIVE_TOKEN.first(key_hash=hash_key(key))
    return token if token is not None and token.user.is_active else None


def token_for_header(header: str) -> ApiToken | None:
    """The live token an `Authorization: Token <key>` header names, or None (read as DRF reads it)."""
    parts = header.split()
    return live_token(parts[1]) if len(parts) == 2 and parts[0] == "Token" else None


class HashedTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        from api.throttling import anonymous_throttle_check

        try:
            result = super().authenticate(request)
        except exceptions.AuthenticationFailed:
            anonymous_throttle_check(request)
            raise
        if result is None and not getattr(getattr(request._request, "user", None), "is_authenticated", False):
            anonymous_throttle_check(request)  # neither a token nor a session: an anonymous client
        return result

    def authenticate_credentials(self, key):
        token = live_token(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        # Touch last_used_at at most once a minute to keep reads cheap.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return (token.user, token)
