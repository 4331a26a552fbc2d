from __future__ import annotations

import hashlib
import math
from datetime import timedelta

from axes.backends import AxesStandaloneBackend
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from rest_framework.throttling import SimpleRateThrottle

from config.proxies import client_ip


class AxesBackend(AxesStandaloneBackend):
    """Lock-out checks for every login that comes through an HTTP request.

    Calls without a request (Django's test client `login()`, code in management
    commands) cannot come from the network, so they skip the check instead of
    raising; every web login form passes the request and is throttled.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def login_failures_from(ip: str) -> int:
    """Failed log-ins from one address within the cool-off, summed over every username tried.

    django-axes keeps one AccessAttempt per (username, address); it locks a pair, which a
    sprayer trying one password on many usernames never trips.
    """
    cutoff = timezone.now() - timedelta(hours=settings.AXES_COOLOFF_TIME)
    failures = AccessAttempt.objects.filter(ip_address=ip, attempt_time__gte=cutoff).aggregate(
        n=Sum("failures_since_start")
    )
    return failures["n"] or 0


class LoginView(auth_views.LoginView):
    """The log-in form, refused (429) for an address over FAULTLINE_LOGIN_IP_FAILURE_LIMIT failures."""

    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if (
            settings.AXES_ENABLED
            and login_failures_from(client_ip(request)) >= settings.FAULTLINE_LOGIN_IP_FAILURE_LIMIT
        ):
            return render(request, "registration/locked_out.html", {"by_address": True}, status=429)
        return super().post(request, *args, **kwargs)


class _ResetThrottle(SimpleRateThrottle):
    """A password-reset budget per `ident` (an address or a client), counted in the cache as DRF's throttles are."""

    def __init__(self, scope: str, rate: str):
        self.scope, self.rate = scope, rate
        super().__init__()

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": view}


def password_reset_wait(request: HttpRequest, email: str) -> float | None:
    """Seconds to wait before another reset request for `email` from this client, or None if it may go now.

    Two budgets: per address (FAULTLINE_PASSWORD_RESET_RATE_EMAIL), so nobody floods one inbox, and per
    client (FAULTLINE_PASSWORD_RESET_RATE_IP), so nobody sprays every address. Counted whether or not the
    address has an account: the answer must not tell which ones do.
    """
    digest = hashlib.sha256(email.strip().lower().encode()).hexdigest()
    budgets = [
        (_ResetThrottle("reset-email", settings.FAULTLINE_PASSWORD_RESET_RATE_EMAIL), digest),
        (_ResetThrottle("reset-ip", settings.FAULTLINE_PASSWORD_RESET_RATE_IP), client_ip(request)),
    ]
    waits = [throttle.wait() or 1.0 for throttle, ident in budgets if not throttle.allow_request(request, ident)]
    return max(waits) if waits else None


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset form, rate-limited per address and per client (429 with the time to wait)."""

    def form_valid(self, form):
        wait = password_reset_wait(self.request, form.cleaned_data["email"])
        if wait is not None:
            minutes = max(1, math.ceil(wait / 60))
            form.add_error(
                None,
                f"Too many password-reset requests for this address or from your network; "
                f"try again in {minutes} minute{'s' if minutes != 1 else ''}.",
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().form_valid(form)


class TokensRevokedOnPasswordChange:
    """A new password revokes the user's API tokens: whoever knew the old one may have made one.

    A password validator, because Django tells every validator of every password set and saved (the
    account page, a reset link, the admin, `manage.py changepassword`): one rule that no path skips."""

    def validate(self, password, user=None) -> None:
        return None

    def password_changed(self, password, user) -> None:
        from annotate.studies.tokens import tokens_revoke_all

        if user is not None and user.pk is not None:
            tokens_revoke_all(user=user)

    def get_help_text(self) -> str:
        return "Setting a new password revokes your API tokens."


PasswordChangeView = auth_views.PasswordChangeView
PasswordResetConfirmView = auth_views.PasswordResetConfirmView
