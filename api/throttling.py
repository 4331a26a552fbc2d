"""Rate limits: anonymous clients by address, signed-in clients per token (or per session user)."""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle

from annotate.models import ApiToken


class TokenRateThrottle(UserRateThrottle):
    """The "user" rate, counted per API token, so one leaked or runaway token cannot
    starve the owner's other tokens or browser session; session requests count per user."""

    scope = "user"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            return self.cache_format % {"scope": self.scope, "ident": f"token-{request.auth.pk}"}
        if request.user and request.user.is_authenticated:
            return self.cache_format % {"scope": self.scope, "ident": f"user-{request.user.pk}"}
        return None  # anonymous requests are AnonRateThrottle's
