"""The interactive API docs: a page for people, so a browser that is not logged in is sent to log in."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated


class ApiDocsView(SpectacularSwaggerSplitView):
    def handle_exception(self, exc):
        # DRF refuses before the view runs (SERVE_PERMISSIONS): a bare 401 page helps no browser.
        if isinstance(exc, NotAuthenticated):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
