from __future__ import annotations

from axes.backends import AxesStandaloneBackend


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
