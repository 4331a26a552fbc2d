"""API tokens: create one (its key is shown once) and revoke it.

Only a sha256 of the key is stored (see api.authentication), so a lost key
cannot be shown again; the user revokes it and creates another.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone

from annotate.models import ApiToken, TokenScope

KEY_PREFIX = "flt_"
MAX_ACTIVE_TOKENS = 20


def token_key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


EXPIRY_CHOICES = (("", "never"), ("7", "in 7 days"), ("30", "in 30 days"), ("90", "in 90 days"), ("365", "in a year"))
MAX_EXPIRY_DAYS = 3650


def token_expiry(days: str) -> datetime | None:
    """When a token made now expires, from a number of days as a form sends it ("" for never)."""
    days = (days or "").strip()
    if not days:
        return None
    if not days.isdigit() or not 1 <= int(days) <= MAX_EXPIRY_DAYS:
        raise ValidationError(
            {"expires_in": f"Expiry is a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or never."}
        )
    return timezone.now() + timedelta(days=int(days))


def token_create(
    *, user, name: str, scope: str = TokenScope.WRITE, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token for `user`: `scope` read (safe methods only) or write, valid until `expires_at`
    (None: until revoked). Returns the token and its key, which is never stored."""
    name = name.strip()
    if scope not in TokenScope.values:
        raise ValidationError({"scope": "A token reads (read) or reads and writes (write)."})
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_in": "The expiry must be in the future."})
    if not name:
        raise ValidationError({"name": "Give the token a name, e.g. the machine or script that uses it."})
    if len(name) > 100:
        raise ValidationError({"name": "At most 100 characters."})
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_ACTIVE_TOKENS:
        raise ValidationError({"name": f"You have {MAX_ACTIVE_TOKENS} active tokens; revoke one first."})
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=key[:12], key_hash=token_key_hash(key), scope=scope, expires_at=expires_at
    )
    return token, key


def token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of `user`'s tokens; it stops authenticating at once. Another user's token is not found."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise ApiToken.DoesNotExist("No such token")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def tokens_revoke_all(*, user) -> int:
    """Revoke every live token of `user` (a new password, or "log out everywhere"); returns how many."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
