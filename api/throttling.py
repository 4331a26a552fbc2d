"""Rate limits: anonymous clients by address (at authentication), signed-in clients per token or per user."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from annotate.models import ApiToken
from config.proxies import client_ip


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


class AnonymousThrottle(AnonRateThrottle):
    """The "anon" rate by client address, checked while authenticating (see api.authentication).

    DRF checks throttles after permissions, so a request without valid
    credentials would get its 401 without ever being counted: a token guesser
    would never be slowed. Counting it at authentication time closes that gap.
    """

    def get_cache_key(self, request, view):
        # Never touch request.user here: this runs inside authentication.
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def get_ident(self, request):
        return client_ip(request)


def anonymous_throttle_check(request) -> None:
    """Count an unauthenticated API request; raise Throttled once the address is over the anon rate."""
    throttle = AnonymousThrottle()
    if not throttle.allow_request(request, None):
        raise exceptions.Throttled(throttle.wait())
