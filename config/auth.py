from __future__ import annotations

from datetime import timedelta

from axes.backends import AxesStandaloneBackend
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

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
