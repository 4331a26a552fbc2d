"""Token authentication against hashed keys (annotate.ApiToken).

DRF's stock TokenAuthentication keeps keys in clear text; we store a sha256
and compare hashes, so a database leak does not leak usable tokens.
"""

from __future__ import annotations

import hashlib

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.permissions import SAFE_METHODS

from annotate.models import ApiToken, TokenScope
from lib.db.prepared import Prepared

# Every API request with a token asks this first: compiled once (lib.db.prepared).
_LIVE_TOKEN = Prepared(
    lambda key_hash: ApiToken.objects.select_related("user").filter(key_hash=key_hash, revoked_at__isnull=True)[:1],
    key_hash=str,
)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _unrevoked_token(key: str) -> ApiToken | None:
    """The unrevoked token of an active user with this key (expired or not), or None."""
    token = _LIVE_TOKEN.first(key_hash=hash_key(key))
    return token if token is not None and token.user.is_active else None


def live_token(key: str) -> ApiToken | None:
    """The unrevoked, unexpired token of an active user with this key, or None."""
    token = _unrevoked_token(key)
    return token if token is not None and not token.expired(timezone.now()) else None


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
        if result is not None and result[1].scope == TokenScope.READ and request.method not in SAFE_METHODS:
            # Here, not in each view's permissions: every endpoint, present and future, is covered.
            raise exceptions.PermissionDenied(
                "This is a read-only token: it may only read (GET). Use a token with write access to change data."
            )
        return result

    def authenticate_credentials(self, key):
        token = _unrevoked_token(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.expired(now):
            raise exceptions.AuthenticationFailed(
                f"This token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one on the API tokens page."
            )
        # Touch last_used_at at most once a minute to keep reads cheap.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return (token.user, token)
